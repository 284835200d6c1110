"""The bodies of the cryptographic routes of symmetric keys: encrypt, decrypt, re-encrypt, data
keys, their batches, and MACs (``encrypt``/``decrypt`` also carry RSA-OAEP's raw form).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field

from keymanager.api.schemas import Body, Context, ItemError, decode_base64
from keymanager.domain.key_specs import EncryptionAlgorithm


def _json_integer(value: object) -> object:
    """An integer must be a JSON integer: ``256.0`` and ``true`` are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be an integer")
    return value


class EncryptRequest(Body):
    plaintext: str = Field(description="Standard base64 of the bytes to encrypt.")
    context: Context | None = Field(default=None, description="Encryption context: needed again to decrypt.")
    algorithm: Annotated[EncryptionAlgorithm | None, Field(strict=False)] = Field(
        default=None,
        description="RSA ENCRYPT_DECRYPT keys only (required there): one of the key's encryption_algorithms; "
        "the answer is then the raw OAEP ciphertext in base64, with no context.",
    )

    def plaintext_bytes(self) -> bytes:
        return decode_base64(self.plaintext, "plaintext")


class EncryptResponse(BaseModel):
    ciphertext: str
    key_id: str
    key_version: int | None = Field(default=None, description="Symmetric keys.")
    algorithm: EncryptionAlgorithm | None = Field(default=None, description="RSA keys: the OAEP algorithm.")


class DecryptRequest(Body):
    ciphertext: str = Field(max_length=200_000)
    context: Context | None = None
    algorithm: Annotated[EncryptionAlgorithm | None, Field(strict=False)] = Field(
        default=None, description="RSA keys only (required there): the ciphertext is then raw OAEP in base64."
    )


class DecryptResponse(BaseModel):
    plaintext: str = Field(description="Standard base64 of the decrypted bytes.")


class ReencryptRequest(Body):
    ciphertext: str = Field(max_length=200_000)
    context: Context | None = None
    destination_key: str | None = Field(default=None, description="Default: this key's primary version.")
    destination_context: Context | None = Field(default=None, description="Default: the same context.")


class DataKeyRequest(Body):
    bits: Annotated[Literal[128, 256], BeforeValidator(_json_integer)] = 256
    include_plaintext: bool = True
    context: Context | None = None


class DataKeyResponse(BaseModel):
    plaintext: str | None = Field(default=None, description="Base64 of the data key; use it, then forget it.")
    ciphertext: str
    key_id: str
    key_version: int


class EncryptItem(Body):
    plaintext: str
    context: Context | None = None


class DecryptItem(Body):
    ciphertext: str = Field(max_length=200_000)
    context: Context | None = None


class EncryptBatchRequest(Body):
    items: list[EncryptItem]


class DecryptBatchRequest(Body):
    items: list[DecryptItem]


class EncryptBatchResponse(BaseModel):
    results: list[EncryptResponse | ItemError]


class DecryptBatchResponse(BaseModel):
    results: list[DecryptResponse | ItemError]


class MacRequest(Body):
    data: str = Field(description="Standard base64 of the bytes to MAC.")
    context: Context | None = None


class MacResponse(BaseModel):
    mac: str = Field(description="Base64 of HMAC-SHA256 over uint64_be(len(context)) ‖ context ‖ data.")
    key_id: str
    key_version: int


class MacVerifyRequest(Body):
    data: str
    mac: str
    context: Context | None = None
    key_version: int | None = Field(default=None, ge=1, description="Default: the primary version.")


class MacVerifyResponse(BaseModel):
    valid: bool
