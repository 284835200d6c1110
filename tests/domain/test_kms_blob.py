"""The KMS API's binary CiphertextBlob: the documented layout, byte for byte, and one opaque
refusal for anything else."""

from __future__ import annotations

import pytest

from keymanager.domain import ciphertext as km1
from keymanager.domain import kms_blob
from keymanager.domain.models import Algorithm
from keymanager.errors import DecryptionFailed

KEY_ID = "0123456789abcdef0123456789abcdef"


def test_layout_byte_for_byte() -> None:
    body = bytes(range(12)) + b"secret-ct" + bytes(16)
    blob = kms_blob.encode(km1.Ciphertext(KEY_ID, 7, body), Algorithm.AES_256_GCM)
    assert blob == b"km" + b"\x01" + b"\x02" + bytes.fromhex(KEY_ID) + b"\x00\x00\x00\x07" + body
    assert kms_blob.decode(blob) == (km1.Ciphertext(KEY_ID, 7, body), Algorithm.AES_256_GCM)


def test_the_blob_and_the_km1_string_name_the_same_authenticated_header() -> None:
    text = km1.parse(km1.Ciphertext(KEY_ID, 3, b"\x01" * 48).encode())
    decoded, algorithm = kms_blob.decode(kms_blob.encode(text, Algorithm.AES_256_CBC_HMAC_SHA256))
    assert decoded.header == text.header == f"km:1:{KEY_ID}:3:".encode()
    assert algorithm is Algorithm.AES_256_CBC_HMAC_SHA256


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"km",
        b"km\x01\x02" + bytes.fromhex(KEY_ID) + b"\x00\x00\x00\x01",  # no body
        b"xx\x01\x02" + bytes.fromhex(KEY_ID) + b"\x00\x00\x00\x01body",
        b"km\x02\x02" + bytes.fromhex(KEY_ID) + b"\x00\x00\x00\x01body",
        b"km\x01\x09" + bytes.fromhex(KEY_ID) + b"\x00\x00\x00\x01body",
        b"km\x01\x02" + bytes.fromhex(KEY_ID) + b"\x00\x00\x00\x00body",
        b"km\x01\x02" + bytes.fromhex(KEY_ID) + b"\x00\x00\x00\x01" + bytes(kms_blob.MAX_BLOB_BYTES),
    ],
)
def test_anything_else_is_one_opaque_refusal(blob: bytes) -> None:
    with pytest.raises(DecryptionFailed) as refused:
        kms_blob.decode(blob)
    assert str(refused.value) == str(DecryptionFailed())
