"""Create, Activate, Get, Encrypt/Decrypt (AES-CBC-PKCS5 with a server IV), Revoke and Destroy with
PyKMIP's ``ProxyKmipClient`` against a spawned server over mTLS."""

from __future__ import annotations

import pytest
from kmip import enums
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import (
    OWNER,
    STRANGER,
    KmipServer,
    create_aes,
    kmip_server,
)

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


def test_a_registered_aes_256_key_is_unwrapped_into_the_hsm(kmip_server: KmipServer) -> None:
    import os

    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from kmip.pie import objects

    material = os.urandom(32)
    with kmip_server.connected(OWNER) as client:
        masks = [enums.CryptographicUsageMask.ENCRYPT, enums.CryptographicUsageMask.DECRYPT]
        uid = client.register(objects.SymmetricKey(enums.CryptographicAlgorithm.AES, 256, material, masks, "byok"))
        client.activate(uid)
        sealed, iv = client.encrypt(b"x" * 16, uid=uid, cryptographic_parameters=CBC)
        opened = Cipher(algorithms.AES(material), modes.CBC(iv)).decryptor()
        assert (opened.update(sealed) + opened.finalize())[:16] == b"x" * 16  # the HSM holds the given key
        with pytest.raises(KmipOperationFailure) as kept:
            client.get(uid)
        assert kept.value.reason == enums.ResultReason.PERMISSION_DENIED  # and keeps it
        with pytest.raises(KmipOperationFailure) as odd:
            client.register(objects.SymmetricKey(enums.CryptographicAlgorithm.AES, 160, os.urandom(20)))
        assert odd.value.reason == enums.ResultReason.INVALID_FIELD and "AES-160" in str(odd.value)
    with kmip_server.admin() as rest:
        assert rest.get(f"/v1/keys/{uid}").json()["origin"] == "external"


@pytest.mark.parametrize("bits", [128, 192, 256])
def test_aes_keys_of_every_length_of_the_table_are_created_and_used(kmip_server: KmipServer, bits: int) -> None:
    with kmip_server.connected(OWNER) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, bits)
        client.activate(uid)
        shown = {a.attribute_name.value: a.attribute_value for a in client.get_attributes(uid)[1]}
        assert shown["Cryptographic Length"].value == bits
        assert shown["Cryptographic Algorithm"].value == enums.CryptographicAlgorithm.AES
        sealed, iv = client.encrypt(b"field", uid=uid, cryptographic_parameters=CBC)
        assert client.decrypt(sealed, uid=uid, cryptographic_parameters=CBC, iv_counter_nonce=iv) == b"field"
        with pytest.raises(KmipOperationFailure) as odd:
            client.create(enums.CryptographicAlgorithm.AES, bits + 8)
        assert (
            odd.value.reason == enums.ResultReason.INVALID_FIELD
            and "AES-128, AES-192, AES-256, HMAC-SHA224 of 224 bits" in str(odd.value)
        )
    with kmip_server.admin() as rest:
        key = rest.get(f"/v1/keys/{uid}").json()
        assert key["algorithm"] == f"AES_{bits}_CBC_PAD"  # no mode named at Create: raw CBC, for KMIP only
    gcm = create_aes(kmip_server, OWNER, bits)
    with kmip_server.admin() as rest:
        assert rest.get(f"/v1/keys/{gcm}").json()["algorithm"] == f"AES_{bits}_GCM"  # GCM named: usable natively


@pytest.mark.parametrize("size", [16, 24])
def test_a_registered_aes_128_or_192_key_is_the_key_the_hsm_uses(kmip_server: KmipServer, size: int) -> None:
    import os

    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from kmip.pie import objects

    material = os.urandom(size)
    with kmip_server.connected(OWNER) as client:
        masks = [enums.CryptographicUsageMask.ENCRYPT, enums.CryptographicUsageMask.DECRYPT]
        uid = client.register(objects.SymmetricKey(enums.CryptographicAlgorithm.AES, size * 8, material, masks))
        client.activate(uid)
        sealed, iv = client.encrypt(b"card number", uid=uid, cryptographic_parameters=CBC)
    opened = Cipher(algorithms.AES(material), modes.CBC(iv)).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    plain = unpadder.update(opened.update(sealed) + opened.finalize()) + unpadder.finalize()
    assert plain == b"card number"  # the given key, under the server's IV
    with kmip_server.admin() as rest:
        assert rest.get(f"/v1/keys/{uid}").json()["algorithm"] == f"AES_{size * 8}_CBC_PAD"


def _ttlv(tag: int, kind: int, value: bytes) -> bytes:
    return tag.to_bytes(3, "big") + bytes([kind]) + len(value).to_bytes(4, "big") + value + bytes(-len(value) % 8)


def _mac_verify(uid: str, data: bytes, mac: bytes) -> bytes:
    """A MACVerify request (PyKMIP's codec has no payload for it: written here)."""
    version = _ttlv(
        0x420069, 1, _ttlv(0x42006A, 2, (1).to_bytes(4, "big")) + _ttlv(0x42006B, 2, (2).to_bytes(4, "big"))
    )
    header = _ttlv(0x420077, 1, version + _ttlv(0x42000D, 2, (1).to_bytes(4, "big")))
    payload = _ttlv(0x420079, 1, _ttlv(0x420094, 7, uid.encode()) + _ttlv(0x4200C2, 8, data) + _ttlv(0x4200C6, 8, mac))
    item = _ttlv(0x42000F, 1, _ttlv(0x42005C, 5, (0x24).to_bytes(4, "big")) + payload)
    return _ttlv(0x420078, 1, header + item)


def test_mac_verify_checks_a_mac_in_the_hsm(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as client:
        uid = client.create(enums.CryptographicAlgorithm.HMAC_SHA256, 256)
        client.activate(uid)
        mac = client.mac(b"card", uid=uid, algorithm=enums.CryptographicAlgorithm.HMAC_SHA256)[1]
    validity = []
    with kmip_server.tls(OWNER) as raw:
        for data, given in ((b"card", mac), (b"card", bytes(32)), (b"other", mac)):
            raw.sendall(_mac_verify(uid, data, given))
            head = raw.recv(8)
            body = b""
            while len(body) < int.from_bytes(head[4:8], "big"):
                body += raw.recv(65536)
            found = body.find(bytes.fromhex("42009b05"))  # the Validity Indicator (PyKMIP cannot read this answer)
            assert found > 0, body
            assert b"\x42\x00\x7f\x05\x00\x00\x00\x04\x00\x00\x00\x00" in body  # Success
            validity.append(int.from_bytes(body[found + 8 : found + 12], "big"))
    valid, invalid = enums.ValidityIndicator.VALID.value, enums.ValidityIndicator.INVALID.value
    assert validity == [valid, invalid, invalid]


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        (enums.KMIPVersion.KMIP_1_4, enums.ResultReason.PERMISSION_DENIED),
        (enums.KMIPVersion.KMIP_2_0, enums.ResultReason.WRONG_KEY_LIFECYCLE_STATE),
    ],
    ids=["1.4", "2.0"],
)
def test_an_object_in_the_wrong_state_is_refused_as_the_version_says(
    kmip_server: KmipServer, version: enums.KMIPVersion, reason: enums.ResultReason
) -> None:
    with kmip_server.connected(OWNER, kmip_version=version) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, 256)
        refusals = []
        with pytest.raises(KmipOperationFailure) as pre_active:
            client.encrypt(b"x", uid=uid, cryptographic_parameters=CBC)
        refusals.append(pre_active.value)
        client.activate(uid)
        for step in (lambda: client.activate(uid), lambda: client.destroy(uid)):
            with pytest.raises(KmipOperationFailure) as refused:
                step()
            refusals.append(refused.value)
        client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, uid)
        client.destroy(uid)
        with pytest.raises(KmipOperationFailure) as destroyed:
            client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, uid)
        refusals.append(destroyed.value)
    assert [r.reason for r in refusals] == [reason] * 4, [str(r) for r in refusals]
    with kmip_server.connected(OWNER, kmip_version=version) as client, pytest.raises(KmipOperationFailure) as other:
        client.encrypt(b"x", uid="no-such-object", cryptographic_parameters=CBC)
    assert other.value.reason == enums.ResultReason.ITEM_NOT_FOUND  # other refusals keep their reasons
