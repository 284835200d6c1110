"""Request and response bodies of API v1."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from keymanager.domain.models import Algorithm, Key, KeyState, Origin, Principal, Role
from keymanager.domain.policy import Policy
from keymanager.domain.tokens import TokenFormat
from keymanager.errors import InvalidRequest

Context = dict[str, str]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    hsm: str
    database: str


class PrincipalCreate(Body):
    name: str = Field(min_length=1, max_length=64, description="Letters, digits, '_', '.', '-'; starts with a letter.")
    role: Role
    cert_subject: str | None = Field(
        default=None,
        max_length=1024,
        description="RFC 4514 subject of a TLS client certificate that authenticates this principal, "
        "e.g. 'CN=billing,O=keymanager'.",
    )


class PrincipalOut(BaseModel):
    id: str
    name: str
    role: Role
    cert_subject: str | None
    created_at: datetime

    @classmethod
    def of(cls, principal: Principal) -> PrincipalOut:
        return cls(
            id=principal.id,
            name=principal.name,
            role=principal.role,
            cert_subject=principal.cert_subject,
            created_at=principal.created_at,
        )


class PrincipalCreated(PrincipalOut):
    token: str = Field(description="Bearer token; shown only in this response.")


class PolicyBody(Body):
    """Which principals may use the key for which operation; anything not granted is denied."""

    encrypt: list[str] = []
    decrypt: list[str] = []
    generate_data_key: list[str] = []
    reencrypt: list[str] = []
    mac: list[str] = []
    tokenize: list[str] = []
    detokenize: list[str] = []
    not_before: datetime | None = None
    not_after: datetime | None = None

    def to_policy(self) -> Policy:
        try:
            return Policy.from_dict(self.model_dump(exclude_none=True))
        except ValueError as exc:
            raise InvalidRequest(f"policy: {exc}") from None

    @classmethod
    def of(cls, policy: Policy) -> PolicyBody:
        return cls.model_validate(policy.to_dict())


class TokenFormatBody(Body):
    """The token format of an ``FF1_AES_256`` key (see docs/tokenization.md)."""

    alphabet: Literal["digits", "alphanumeric"] = "digits"
    keep_first: int = Field(default=0, ge=0, le=6, description="Characters kept in clear at the start.")
    keep_last: int = Field(default=0, ge=0, le=4, description="Characters kept in clear at the end.")
    luhn: Literal["ignore", "valid", "invalid"] = "ignore"

    def to_format(self) -> TokenFormat:
        return TokenFormat.parse(self.model_dump())


class KeyCreate(Body):
    name: str = Field(min_length=1, max_length=128)
    algorithm: Algorithm = Algorithm.AES_256_CBC_HMAC_SHA256
    description: str = Field(default="", max_length=1024)
    policy: PolicyBody = PolicyBody()
    rotation_period_days: int | None = Field(default=None, ge=1, le=36500)
    token_format: TokenFormatBody | None = Field(default=None, description="Required for FF1_AES_256, else absent.")
    origin: Origin = Field(default=Origin.HSM, description="'external': no material until imported.")


class KeyPatch(Body):
    description: str | None = Field(default=None, max_length=1024)
    policy: PolicyBody | None = None
    enabled: bool | None = None
    min_decryption_version: int | None = Field(default=None, ge=1)


class KeyVersionOut(BaseModel):
    version: int
    created_at: datetime


class KeyOut(BaseModel):
    id: str
    name: str
    algorithm: Algorithm
    state: KeyState
    description: str
    primary_version: int
    min_decryption_version: int
    rotation_period_days: int | None
    deletion_date: datetime | None
    policy: PolicyBody
    versions: list[KeyVersionOut]
    created_at: datetime
    updated_at: datetime
    token_format: TokenFormatBody | None = None
    origin: Origin = Origin.HSM

    @classmethod
    def of(cls, key: Key) -> KeyOut:
        return cls(
            id=key.id,
            name=key.name,
            algorithm=key.algorithm,
            state=key.state,
            description=key.description,
            primary_version=key.primary_version,
            min_decryption_version=key.min_decryption_version,
            rotation_period_days=key.rotation_period_days,
            deletion_date=key.deletion_date,
            policy=PolicyBody.of(key.policy),
            versions=[KeyVersionOut(version=v.version, created_at=v.created_at) for v in key.versions.values()],
            created_at=key.created_at,
            updated_at=key.updated_at,
            token_format=None if key.token_format is None else TokenFormatBody(**key.token_format.to_json()),
            origin=key.origin,
        )


class EncryptRequest(Body):
    plaintext: str = Field(description="Standard base64 of the bytes to encrypt.")
    context: Context | None = Field(default=None, description="Encryption context: needed again to decrypt.")

    def plaintext_bytes(self) -> bytes:
        return decode_base64(self.plaintext, "plaintext")


class EncryptResponse(BaseModel):
    ciphertext: str
    key_id: str
    key_version: int


class DecryptRequest(Body):
    ciphertext: str = Field(max_length=200_000)
    context: Context | None = None


class DecryptResponse(BaseModel):
    plaintext: str = Field(description="Standard base64 of the decrypted bytes.")


class ReencryptRequest(Body):
    ciphertext: str = Field(max_length=200_000)
    context: Context | None = None
    destination_key: str | None = Field(default=None, description="Default: this key's primary version.")
    destination_context: Context | None = Field(default=None, description="Default: the same context.")


class DataKeyRequest(Body):
    bits: Literal[128, 256] = 256
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


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail
    request_id: str


class ItemError(BaseModel):
    error: ErrorDetail


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


def decode_base64(value: str, field: str) -> bytes:
    """Strict standard base64; InvalidRequest (never echoing the value) otherwise."""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{field} is not valid base64") from None


def encode_base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        400: "invalid_request or decryption_failed",
        401: "unauthenticated",
        403: "forbidden",
        404: "not found",
        409: "conflict or key state",
        413: "payload_too_large",
        422: "invalid_request (body shape)",
        503: "hsm_unavailable or database_unavailable",
    }.items()
}
