"""Request and response bodies of API v1."""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from keymanager.domain.key_specs import (
    DATA_KEY_PAIR_SPECS,
    EncryptionAlgorithm,
    KeyAgreementAlgorithm,
    KeyUsage,
    MessageType,
    SigningAlgorithm,
    spec_of,
)
from keymanager.domain.models import Algorithm, Key, KeyState, KmipState, Origin, Principal, Role
from keymanager.domain.policy import Policy
from keymanager.domain.tokens import TokenFormat
from keymanager.errors import InvalidRequest

Context = dict[str, str]

_ISO_8601 = re.compile(r"\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}:?\d{2})?)?")
_DECIMAL = re.compile(r"[0-9]{1,18}")


def _iso_8601(value: object) -> object:
    """Only an ISO 8601 string (or a datetime) is a time: never a number, nor a string of one."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_8601.fullmatch(value):
        raise ValueError("must be an ISO 8601 date-time such as 2030-01-31T12:00:00Z")
    return value


def _decimal(value: object) -> object:
    """A query parameter that is a number: decimal digits only (no sign, point, exponent or spaces)."""
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise ValueError("must be a whole number written in decimal digits")
    return value


def _json_integer(value: object) -> object:
    """An integer must be a JSON integer: ``256.0`` and ``true`` are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be an integer")
    return value


def _utc_if_naive(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


IsoTime = Annotated[datetime, Field(strict=False), BeforeValidator(_iso_8601), AfterValidator(_utc_if_naive)]
"""A timestamp: ISO 8601 text only (``since=0.5`` and ``"not_before": 5`` are refused); UTC when
it names no offset."""
QueryInt = Annotated[int, BeforeValidator(_decimal)]
"""A whole number in a query string: decimal digits only."""


class Body(BaseModel):
    """A request body: unknown fields refused, and strict types (a boolean is ``true``/``false``,
    never ``0`` or ``"yes"``; a number is a JSON number, never a string; an integer is never
    ``1.0``); enumerations take their documented values, times are ISO 8601 strings."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Health(BaseModel):
    status: str
    hsm: dict[str, Any] | None = Field(
        default=None,
        description="With ?detail=true: what the token can and cannot do, once this worker has read it "
        '({"supported": [features], "unsupported": {feature: the missing mechanisms}}).',
    )


class Readiness(BaseModel):
    status: str
    hsm: str
    database: str


class PrincipalCreate(Body):
    name: str = Field(min_length=1, max_length=64, description="Letters, digits, '_', '.', '-'; starts with a letter.")
    role: Annotated[Role, Field(strict=False)]
    cert_subject: str | None = Field(
        default=None,
        max_length=1024,
        description="RFC 4514 subject of a TLS client certificate that authenticates this principal, "
        "e.g. 'CN=billing,O=keymanager'.",
    )
    xks_uri_prefix: str | None = Field(
        default=None,
        max_length=128,
        description="Role xks only (an AWS External Key Store): the path prefix of its XKS requests, "
        "e.g. 'keystores/prod'; AWS KMS's XksProxyUriPath is then '/keystores/prod/kms/xks/v1'.",
    )
    xks_region: str | None = Field(
        default=None,
        max_length=32,
        description="Role xks only: the AWS region of the key store (e.g. 'eu-west-1'); requests signed "
        "for another region are refused. Without it, any region's signature is accepted.",
    )
    create_keys: bool = Field(
        default=False,
        description="The principal may create keys it then owns (its own policy names it), as KMIP "
        "clients such as libmongocrypt do; not for roles xks and auditor. Admins need no such flag.",
    )
    key_store: bool = Field(
        default=False,
        description="A KMIP key-store client (vSphere, MySQL's keyring, pg_tde, NetApp): the AES keys it "
        "creates over KMIP are exportable to it, each Get audited; needs create_keys. docs/kmip.md.",
    )


class PrincipalOut(BaseModel):
    id: str
    name: str
    role: Role
    cert_subject: str | None
    created_at: datetime
    xks_uri_prefix: str | None = None
    xks_region: str | None = None
    create_keys: bool = False
    key_store: bool = False

    @classmethod
    def of(cls, principal: Principal) -> PrincipalOut:
        return cls(
            id=principal.id,
            name=principal.name,
            role=principal.role,
            cert_subject=principal.cert_subject,
            created_at=principal.created_at,
            xks_uri_prefix=principal.xks_uri_prefix,
            xks_region=principal.xks_region,
            create_keys=principal.create_keys,
            key_store=principal.key_store,
        )


class PrincipalCreated(PrincipalOut):
    token: str = Field(description="Bearer token; shown only in this response.")


Grantees = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=1000)]


class PolicyBody(Body):
    """Which principals (by name; app, admin or xks principals that exist) may use the key for which
    operation; anything not granted is denied."""

    encrypt: Grantees = []
    decrypt: Grantees = []
    generate_data_key: Grantees = []
    reencrypt: Grantees = []
    mac: Grantees = []
    tokenize: Grantees = []
    detokenize: Grantees = []
    get_key_material: Grantees = Field(
        default=[],
        description="Who may fetch the key's material over KMIP (an exportable key only: docs/kmip.md).",
    )
    sign: Grantees = []
    verify: Grantees = []
    get_public_key: Grantees = []
    derive_shared_secret: Grantees = []
    generate_data_key_pair: Grantees = []
    not_before: IsoTime | None = None
    not_after: IsoTime | None = None

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
    algorithm: Annotated[Algorithm, Field(strict=False)] = Field(
        default=Algorithm.AES_256_CBC_HMAC_SHA256, description="The key spec (docs/contract.md lists them)."
    )
    usage: Annotated[KeyUsage | None, Field(strict=False)] = Field(
        default=None,
        description="What the key is for; required for RSA (SIGN_VERIFY or ENCRYPT_DECRYPT), NIST ECC "
        "SIGN_VERIFY (default) or KEY_AGREEMENT; every other spec has one usage.",
    )
    description: str = Field(default="", max_length=1024)
    policy: PolicyBody = PolicyBody()
    rotation_period_days: int | None = Field(default=None, ge=1, le=36500)
    token_format: TokenFormatBody | None = Field(default=None, description="Required for FF1_AES_256, else absent.")
    origin: Annotated[Origin, Field(strict=False)] = Field(
        default=Origin.HSM, description="'external': no material until imported."
    )


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
    kmip_state: KmipState = Field(
        default=KmipState.ACTIVE,
        description="The key's lifecycle state in KMIP's words (pre_active, active, deactivated, compromised, "
        "destroyed, destroyed_compromised): from its state, refined by what KMIP clients did (docs/kmip.md).",
    )
    exportable: bool = Field(
        default=False,
        description="Generated extractable (but sensitive): its material may be fetched over KMIP by "
        "principals its policy names for get_key_material.",
    )
    usage: KeyUsage
    signing_algorithms: list[str] | None = Field(default=None, description="Present only when non-empty.")
    encryption_algorithms: list[str] | None = Field(default=None, description="Asymmetric keys only.")
    key_agreement_algorithms: list[str] | None = Field(default=None, description="Present only when non-empty.")

    @model_serializer(mode="wrap")
    def _without_empty_lists(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        shown: dict[str, Any] = handler(self)
        for name in _ALGORITHM_LISTS:
            if shown.get(name) is None:
                shown.pop(name, None)
        return shown

    @classmethod
    def of(cls, key: Key, policy: Policy) -> KeyOut:
        """``key`` as the API shows it, with ``policy``: its policy naming principals by name."""
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
            policy=PolicyBody.of(policy),
            versions=[KeyVersionOut(version=v.version, created_at=v.created_at) for v in key.versions.values()],
            created_at=key.created_at,
            updated_at=key.updated_at,
            token_format=None
            if key.token_format is None
            else TokenFormatBody.model_validate(key.token_format.to_json()),
            origin=key.origin,
            kmip_state=key.kmip_state,
            exportable=key.exportable,
            usage=key.key_usage,
            **algorithm_lists(key),
        )


_ALGORITHM_LISTS = ("signing_algorithms", "encryption_algorithms", "key_agreement_algorithms")
_LIST_OF_USAGE = {
    KeyUsage.SIGN_VERIFY: "signing_algorithms",
    KeyUsage.ENCRYPT_DECRYPT: "encryption_algorithms",
    KeyUsage.KEY_AGREEMENT: "key_agreement_algorithms",
}


def algorithm_lists(key: Key) -> dict[str, list[str]]:
    """The algorithm list an asymmetric key shows (from the table of key types), by field name; none for
    a symmetric key."""
    spec = spec_of(key.algorithm)
    field = _LIST_OF_USAGE.get(key.key_usage)
    if not spec.asymmetric or field is None:
        return {}
    return {field: list(spec.algorithms(key.key_usage))}


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


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "message"}, "request_id"}`` and nothing else."""

    model_config = ConfigDict(extra="forbid")

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


class PublicKeyResponse(BaseModel):
    key_id: str
    algorithm: Algorithm
    usage: KeyUsage
    public_key: str = Field(description="Base64 of the DER SubjectPublicKeyInfo.")
    public_key_pem: str
    signing_algorithms: list[str] | None = None
    encryption_algorithms: list[str] | None = None
    key_agreement_algorithms: list[str] | None = None


Base64Message = Annotated[str, Field(max_length=8192, description="Standard base64.")]


class SignRequest(Body):
    message: Base64Message = Field(description="Base64 of the message (RAW, ≤ 4,096 bytes) or of its digest.")
    message_type: Annotated[MessageType, Field(strict=False)] = MessageType.RAW
    algorithm: Annotated[SigningAlgorithm, Field(strict=False)]


class SignResponse(BaseModel):
    signature: str = Field(description="Base64; ECDSA: DER; Ed25519: 64 raw bytes; RSA: the raw signature.")
    key_id: str
    algorithm: SigningAlgorithm


class VerifyRequest(Body):
    message: Base64Message
    message_type: Annotated[MessageType, Field(strict=False)] = MessageType.RAW
    signature: Base64Message
    algorithm: Annotated[SigningAlgorithm, Field(strict=False)]


class VerifyResponse(BaseModel):
    valid: bool
    key_id: str
    algorithm: SigningAlgorithm


class DeriveSharedSecretRequest(Body):
    public_key: Annotated[str, Field(max_length=4096, description="Base64 of the peer's DER SubjectPublicKeyInfo.")]
    algorithm: Annotated[KeyAgreementAlgorithm, Field(strict=False)] = KeyAgreementAlgorithm.ECDH


class DeriveSharedSecretResponse(BaseModel):
    shared_secret: str = Field(description="Base64 of the raw ECDH shared secret (the x-coordinate).")
    key_id: str
    algorithm: KeyAgreementAlgorithm


class DataKeyPairRequest(Body):
    key_pair_spec: Annotated[Algorithm, Field(strict=False, description=f"One of {', '.join(DATA_KEY_PAIR_SPECS)}.")]
    include_plaintext: bool = True
    context: Context | None = None


class DataKeyPairResponse(BaseModel):
    key_id: str
    key_pair_spec: Algorithm
    public_key: str = Field(description="Base64 of the DER SubjectPublicKeyInfo.")
    private_key_ciphertext: str = Field(description="km:1 ciphertext of the PKCS#8 DER private key (see /decrypt).")
    private_key_plaintext: str | None = Field(default=None, description="Base64 of the PKCS#8 DER private key.")


def decode_base64(value: str, field: str) -> bytes:
    """Strict standard base64; InvalidRequest (never echoing the value) otherwise."""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{field} is not valid base64") from None


def encode_base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


_ERRORS = {
    400: "invalid_request or decryption_failed",
    401: "unauthenticated: no credentials, or a token or client certificate no principal holds",
    403: "forbidden: the principal's role or the key's policy does not allow this",
    404: "key_not_found or not_found",
    409: "conflict, key_disabled or key_pending_deletion",
    413: "payload_too_large: the request body is over the route's limit",
    422: "invalid_request: the body or a parameter does not have the documented shape and types",
    429: "rate_limited: too many failed authentications from this client address (see Retry-After)",
    503: "hsm_unavailable or database_unavailable",
}


_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for ``statuses``, each with the error body's schema."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        responses[status] = {"model": ErrorBody, "description": _ERRORS[status]}
        if status == 429:
            responses[status]["headers"] = _RETRY_AFTER
    return responses


ERROR_RESPONSES = error_responses(400, 401, 403, 404, 409, 413, 422, 429, 503)
"""What an authenticated route can answer besides success."""
OPEN_RESPONSES = error_responses(413, 429)
"""What a route anyone may call can answer besides its own statuses (checked before routing)."""
