"""The bodies of the key routes: a key's creation and changes, its policy and token format, and a
key as the API shows it (with the algorithm lists of an asymmetric key, from the table of key types).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from keymanager.api.schemas import Body, IsoTime
from keymanager.domain.key_specs import KeyUsage, spec_of
from keymanager.domain.models import Algorithm, Key, KeyState, Lifecycle, Origin
from keymanager.domain.policy import Policy
from keymanager.domain.tokens import TokenFormat
from keymanager.errors import InvalidRequest

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
    kmip_state: Lifecycle = Field(
        default=Lifecycle.ACTIVE,
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
            kmip_state=key.lifecycle_state,
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
