"""Create, Activate, Get, Encrypt/Decrypt (AES-CBC-PKCS5 with a server IV), Revoke and Destroy with
PyKMIP's ``ProxyKmipClient`` against a spawned server over mTLS."""

from __future__ import annotations

import pytest
from kmip import enums
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import OWNER, STRANGER, KmipServer, kmip_server

__all__ = ["kmip_server"]

CBC = {
    "cryptographic_algorithm": enums.CryptographicAlgorithm.AES,
    "block_cipher_mode": enums.BlockCipherMode.CBC,
    "padding_method": enums.PaddingMethod.PKCS5,
    "random_iv": True,
}


def test_a_key_is_created_activated_used_and_destroyed(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, 256, name="mongo-cmk")
        with pytest.raises(KmipOperationFailure) as pre_active:
            client.encrypt(b"x" * 96, uid=uid, cryptographic_parameters=CBC)
        assert pre_active.value.reason == enums.ResultReason.PERMISSION_DENIED
        client.activate(uid)
        ciphertext, iv = client.encrypt(b"x" * 96, uid=uid, cryptographic_parameters=CBC)
        assert iv is not None and len(iv) == 16 and len(ciphertext) == 112
        assert client.decrypt(ciphertext, uid=uid, cryptographic_parameters=CBC, iv_counter_nonce=iv) == b"x" * 96
        with pytest.raises(KmipOperationFailure) as get:
            client.get(uid)
        assert get.value.reason == enums.ResultReason.PERMISSION_DENIED
        assert "never leaves the HSM" in str(get.value)
        with pytest.raises(KmipOperationFailure) as active:
            client.destroy(uid)
        assert active.value.reason == enums.ResultReason.PERMISSION_DENIED
        client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, uid)
        client.destroy(uid)


def test_a_principal_without_create_keys_cannot_create_nor_see_others_keys(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as owner:
        uid = owner.create(enums.CryptographicAlgorithm.AES, 256)
        owner.activate(uid)
    with kmip_server.connected(STRANGER) as stranger:
        with pytest.raises(KmipOperationFailure) as create:
            stranger.create(enums.CryptographicAlgorithm.AES, 256)
        assert create.value.reason == enums.ResultReason.PERMISSION_DENIED
        with pytest.raises(KmipOperationFailure) as use:
            stranger.encrypt(b"secret", uid=uid, cryptographic_parameters=CBC)
        assert use.value.reason == enums.ResultReason.ITEM_NOT_FOUND


def test_an_hmac_key_computes_macs_in_the_hsm(kmip_server: KmipServer) -> None:
    import hashlib
    import hmac

    with kmip_server.connected(OWNER) as client:
        uid = client.create(enums.CryptographicAlgorithm.HMAC_SHA256, 256, name="blind-index")
        client.activate(uid)
        got_uid, mac = client.mac(b"4111111111111111", uid=uid, algorithm=enums.CryptographicAlgorithm.HMAC_SHA256)
        again = client.mac(b"4111111111111111", uid=uid, algorithm=enums.CryptographicAlgorithm.HMAC_SHA256)[1]
        other = client.mac(b"4111111111111112", uid=uid, algorithm=enums.CryptographicAlgorithm.HMAC_SHA256)[1]
        assert got_uid == uid and len(mac) == 32 and mac == again != other
        assert mac != hmac.new(b"\x00" * 32, b"4111111111111111", hashlib.sha256).digest()
        with pytest.raises(KmipOperationFailure) as wrong:
            client.mac(b"x", uid=uid, algorithm=enums.CryptographicAlgorithm.HMAC_SHA512)
        assert wrong.value.reason == enums.ResultReason.INVALID_FIELD
        with pytest.raises(KmipOperationFailure) as not_aes:
            client.encrypt(b"x", uid=uid, cryptographic_parameters=CBC)
        assert not_aes.value.reason in (enums.ResultReason.INVALID_FIELD, enums.ResultReason.PERMISSION_DENIED)
