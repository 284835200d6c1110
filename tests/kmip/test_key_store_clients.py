"""KMIP key-store clients (issue 37, item 1): vSphere, MySQL's keyring, pg_tde and NetApp Create a
key, then Get its material. A principal an admin made with ``key_store`` (and ``create_keys``) gets
exportable AES keys from its own Create (extractable-but-sensitive in the HSM, handed out only over
its mTLS session, each Get audited); every other principal's keys still never leave the HSM, and
the flag needs ``create_keys``."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from kmip.core import enums
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import KEY_STORE, OWNER, KmipServer, kmip_server

__all__ = ["kmip_server"]

CBC = {
    "cryptographic_algorithm": enums.CryptographicAlgorithm.AES,
    "block_cipher_mode": enums.BlockCipherMode.CBC,
    "padding_method": enums.PaddingMethod.PKCS5,
}


@pytest.mark.parametrize("bits", [128, 256])
def test_a_key_store_client_gets_the_key_it_created_and_the_hsm_uses(kmip_server: KmipServer, bits: int) -> None:
    with kmip_server.connected(KEY_STORE) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, bits)
        material = bytes(client.get(uid).value)
        client.activate(uid)
        sealed, iv = client.encrypt(b"tablespace key", uid=uid, cryptographic_parameters=CBC)
    assert len(material) == bits // 8
    opened = Cipher(algorithms.AES(material), modes.CBC(iv)).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    assert unpadder.update(opened.update(sealed) + opened.finalize()) + unpadder.finalize() == b"tablespace key"
    gets = [r for r in kmip_server.audit("kmip.Get") if r["key_id"] == uid]
    assert [r["outcome"] for r in gets] == ["ok"] and gets[0]["details"].get("exported") is True
    assert material.hex() not in str(gets)
    with kmip_server.admin() as rest:
        key = rest.get(f"/v1/keys/{uid}").json()
        assert key["algorithm"] == f"AES_{bits}_CBC_PAD" and key.get("exportable") is True, key


def test_other_principals_keys_still_never_leave_the_hsm(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, 256)
        with pytest.raises(KmipOperationFailure) as refused:
            client.get(uid)
    assert refused.value.reason == enums.ResultReason.PERMISSION_DENIED and "never leaves the HSM" in str(refused.value)


def test_the_flag_is_an_admins_and_needs_create_keys(kmip_server: KmipServer) -> None:
    with kmip_server.admin() as rest:
        alone = rest.post("/v1/principals", json={"name": "ks-without-create", "role": "app", "key_store": True})
        assert alone.status_code == 400 and "create_keys" in alone.json()["error"]["message"], alone.text
        listed = {p["name"]: p for p in rest.get("/v1/principals").json()}
    assert listed[KEY_STORE]["key_store"] is True and listed[OWNER]["key_store"] is False


def test_a_key_store_client_gets_back_the_key_it_registered(kmip_server: KmipServer) -> None:
    import os

    from kmip.pie import objects

    material = os.urandom(32)
    masks = [enums.CryptographicUsageMask.ENCRYPT, enums.CryptographicUsageMask.DECRYPT]
    with kmip_server.connected(KEY_STORE) as client:
        uid = client.register(objects.SymmetricKey(enums.CryptographicAlgorithm.AES, 256, material, masks))
        assert bytes(client.get(uid).value) == material
    with kmip_server.connected(OWNER) as client:  # another principal's registered key stays in the HSM
        other = client.register(objects.SymmetricKey(enums.CryptographicAlgorithm.AES, 256, material, masks))
        with pytest.raises(KmipOperationFailure):
            client.get(other)
