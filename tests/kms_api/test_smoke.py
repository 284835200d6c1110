from __future__ import annotations

from typing import Any


def test_create_encrypt_decrypt(admin_kms: Any) -> None:
    key = admin_kms.create_key(Description="smoke")["KeyMetadata"]
    sealed = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"hello")
    opened = admin_kms.decrypt(CiphertextBlob=sealed["CiphertextBlob"])
    assert opened["Plaintext"] == b"hello"
    assert opened["KeyId"] == key["Arn"]
