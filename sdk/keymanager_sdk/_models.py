"""Typed results of the API: frozen dataclasses built from the service's JSON.

Each ``from_json`` takes the decoded JSON object of one API answer and raises ``KeyError``,
``TypeError`` or ``ValueError`` on a shape it does not expect (the core turns those into
``APIError``). Secrets (tokens, data keys) are left out of ``repr``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Context = Mapping[str, str]
"""An encryption context: string keys and values; decrypting needs the same context."""

ASYMMETRIC_OPERATIONS = ("sign", "verify", "get_public_key", "derive_shared_secret", "generate_data_key_pair")
"""Rights of asymmetric keys (and ``generate_data_key_pair`` of symmetric ones); ``Policy.to_json``
sends them only when granted, so a policy without them suits a service older than them too."""
OPERATIONS = (
    "encrypt",
    "decrypt",
    "generate_data_key",
    "reencrypt",
    "mac",
    "tokenize",
    "detokenize",
    *ASYMMETRIC_OPERATIONS,
)


def _time(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


def _opt_time(value: Any) -> datetime | None:
    return None if value is None else _time(value)


@dataclass(frozen=True)
class Policy:
    """Which principals may use a key for which operation; anything not granted is denied."""

    encrypt: tuple[str, ...] = ()
    decrypt: tuple[str, ...] = ()
    generate_data_key: tuple[str, ...] = ()
    reencrypt: tuple[str, ...] = ()
    mac: tuple[str, ...] = ()
    tokenize: tuple[str, ...] = ()
    detokenize: tuple[str, ...] = ()
    sign: tuple[str, ...] = ()
    verify: tuple[str, ...] = ()
    get_public_key: tuple[str, ...] = ()
    derive_shared_secret: tuple[str, ...] = ()
    generate_data_key_pair: tuple[str, ...] = ()
    not_before: datetime | None = None
    not_after: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policy:
        grants = {op: tuple(str(n) for n in data.get(op) or ()) for op in OPERATIONS}
        return cls(**grants, not_before=_opt_time(data.get("not_before")), not_after=_opt_time(data.get("not_after")))

    def to_json(self) -> dict[str, Any]:
        """The API shape (times as ISO 8601, absent when unset; ``ASYMMETRIC_OPERATIONS`` absent when
        nobody is granted them)."""
        out: dict[str, Any] = {
            op: list(getattr(self, op)) for op in OPERATIONS if op not in ASYMMETRIC_OPERATIONS or getattr(self, op)
        }
        for name in ("not_before", "not_after"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value.isoformat()
        return out


@dataclass(frozen=True)
class KeyVersion:
    version: int
    created_at: datetime


@dataclass(frozen=True)
class Key:
    """A key's metadata. ``state`` is ``enabled``, ``disabled``, ``pending_deletion`` or ``destroyed``."""

    id: str
    name: str
    algorithm: str
    state: str
    description: str
    primary_version: int
    min_decryption_version: int
    rotation_period_days: int | None
    policy: Policy
    versions: tuple[KeyVersion, ...]
    created_at: datetime
    updated_at: datetime
    deletion_date: datetime | None = None
    usage: str | None = None
    """The key usage (``ENCRYPT_DECRYPT``, ``SIGN_VERIFY``, ``GENERATE_VERIFY_MAC``,
    ``KEY_AGREEMENT``, ``TOKENIZE``); None from a service older than asymmetric keys."""
    signing_algorithms: tuple[str, ...] = ()
    encryption_algorithms: tuple[str, ...] = ()
    key_agreement_algorithms: tuple[str, ...] = ()
    """What an asymmetric key accepts (empty for other keys and usages)."""
    etag: str | None = None
    """The key's metadata version, from the answer's ``ETag`` (None in a listing): pass it to
    ``update_key(..., if_match=)`` to change the key only if nobody changed it meanwhile."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Key:
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            algorithm=str(data["algorithm"]),
            state=str(data["state"]),
            description=str(data.get("description") or ""),
            primary_version=int(data["primary_version"]),
            min_decryption_version=int(data["min_decryption_version"]),
            rotation_period_days=data.get("rotation_period_days"),
            policy=Policy.from_json(data.get("policy") or {}),
            versions=tuple(KeyVersion(int(v["version"]), _time(v["created_at"])) for v in data.get("versions") or ()),
            created_at=_time(data["created_at"]),
            updated_at=_time(data["updated_at"]),
            deletion_date=_opt_time(data.get("deletion_date")),
            usage=None if data.get("usage") is None else str(data["usage"]),
            signing_algorithms=tuple(str(a) for a in data.get("signing_algorithms") or ()),
            encryption_algorithms=tuple(str(a) for a in data.get("encryption_algorithms") or ()),
            key_agreement_algorithms=tuple(str(a) for a in data.get("key_agreement_algorithms") or ()),
        )


@dataclass(frozen=True)
class Principal:
    """A named caller with a role (``admin``, ``app`` or ``auditor``)."""

    id: str
    name: str
    role: str
    cert_subject: str | None
    created_at: datetime
    create_keys: bool = False
    """It may create keys it then owns (KMIP clients such as libmongocrypt)."""
    key_store: bool = False
    """A KMIP key-store client: the AES keys it creates over KMIP are exportable to it."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Principal:
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            role=str(data["role"]),
            cert_subject=data.get("cert_subject"),
            created_at=_time(data["created_at"]),
            create_keys=bool(data.get("create_keys", False)),
            key_store=bool(data.get("key_store", False)),
        )


@dataclass(frozen=True)
class NewPrincipal(Principal):
    """A principal just created, with its bearer token (shown by the service only once)."""

    token: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NewPrincipal:
        base = Principal.from_json(data)
        return cls(**{**base.__dict__, "token": str(data["token"])})


class Encrypted(str):
    """A ciphertext: the ciphertext string itself (a ``str`` subclass), which also tells the key
    id and version that made it (``key_id``, ``key_version``). ``ciphertext`` is the plain ``str``.

    Every call of the encrypt family (``encrypt``, ``encrypt_many``, ``reencrypt``) returns this
    type, so a result can be stored or passed to ``decrypt`` as it is. Immutable.
    """

    key_id: str
    key_version: int

    def __new__(cls, ciphertext: str, key_id: str, key_version: int) -> Encrypted:
        made = super().__new__(cls, ciphertext)
        object.__setattr__(made, "key_id", key_id)
        object.__setattr__(made, "key_version", key_version)
        return made

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Encrypted is immutable: cannot set {name}")

    def __reduce__(self) -> tuple[type[Encrypted], tuple[str, str, int]]:
        return (Encrypted, (self.ciphertext, self.key_id, self.key_version))

    def __repr__(self) -> str:
        return f"Encrypted(ciphertext={self.ciphertext!r}, key_id={self.key_id!r}, key_version={self.key_version})"

    @property
    def ciphertext(self) -> str:
        """The ciphertext as a plain ``str``."""
        return str.__str__(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Encrypted:
        return cls(str(data["ciphertext"]), str(data["key_id"]), int(data["key_version"]))

    @classmethod
    def from_oaep_json(cls, data: Mapping[str, Any]) -> Encrypted:
        """An RSA-OAEP answer: base64 of the raw OAEP ciphertext; asymmetric keys have one version."""
        return cls(str(data["ciphertext"]), str(data["key_id"]), int(data.get("key_version") or 1))


@dataclass(frozen=True)
class DataKey:
    """A data key: ``plaintext`` (None when not asked for) and the same key wrapped by the service."""

    plaintext: bytes | None = field(repr=False)
    ciphertext: str
    key_id: str
    key_version: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DataKey:
        plaintext = data.get("plaintext")
        return cls(
            plaintext=None if plaintext is None else b64decode(plaintext),
            ciphertext=str(data["ciphertext"]),
            key_id=str(data["key_id"]),
            key_version=int(data["key_version"]),
        )


@dataclass(frozen=True)
class Mac:
    """A deterministic HMAC-SHA256 made in the HSM (e.g. a blind index)."""

    mac: bytes
    key_id: str
    key_version: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Mac:
        return cls(b64decode(data["mac"]), str(data["key_id"]), int(data["key_version"]))

    def hex(self) -> str:
        """The MAC as lowercase hex (handy as an indexed database column)."""
        return self.mac.hex()


@dataclass(frozen=True)
class AuditRecord:
    """One hash-chained audit record: ``seq`` counts within its ``chain`` (one per writer of the
    service); ``position`` is its place in the whole log (the listing's order and cursors)."""

    seq: int
    time: datetime
    request_id: str
    principal: str | None
    action: str
    key_id: str | None
    key_version: int | None
    outcome: str
    status: int | None
    client: str | None
    details: Mapping[str, Any] | None
    prev_hash: str
    hash: str
    chain: int = 1
    position: int | None = None
    """None from a service before chains (its ``seq`` was the position)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditRecord:
        position = data.get("position")
        return cls(
            chain=int(data.get("chain", 1)),
            position=None if position is None else int(position),
            seq=int(data["seq"]),
            time=_time(data["time"]),
            request_id=str(data.get("request_id") or ""),
            principal=data.get("principal"),
            action=str(data["action"]),
            key_id=data.get("key_id"),
            key_version=data.get("key_version"),
            outcome=str(data["outcome"]),
            status=data.get("status"),
            client=data.get("client"),
            details=data.get("details"),
            prev_hash=str(data.get("prev_hash") or ""),
            hash=str(data.get("hash") or ""),
        )


@dataclass(frozen=True)
class AuditPage:
    """One page of audit records and the cursor of the next page (None at the end)."""

    records: tuple[AuditRecord, ...]
    next: int | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditPage:
        cursor = data.get("next")
        return cls(tuple(AuditRecord.from_json(r) for r in data["records"]), None if cursor is None else int(cursor))


@dataclass(frozen=True)
class AuditVerification:
    """The result of checking the audit hash chain."""

    ok: bool
    records: int
    first_broken_seq: int | None
    reason: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditVerification:
        broken = data.get("first_broken_seq")
        return cls(
            ok=bool(data["ok"]),
            records=int(data["records"]),
            first_broken_seq=None if broken is None else int(broken),
            reason=data.get("reason"),
        )


@dataclass(frozen=True)
class Health:
    status: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Health:
        return cls(str(data["status"]))


@dataclass(frozen=True)
class Readiness:
    """``ok`` when both the HSM and the database answer; ``hsm`` / ``database`` say which does not."""

    ok: bool
    status: str
    hsm: str
    database: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Readiness:
        status = str(data["status"])
        return cls(status == "ok", status, str(data.get("hsm", "")), str(data.get("database", "")))


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(value: Any) -> bytes:
    return base64.b64decode(str(value), validate=True)


def as_bytes(data: object, what: str = "plaintext") -> bytes:
    """``str`` encoded as UTF-8, or the bytes of a bytes-like value (``bytes``, ``bytearray``,
    ``memoryview`` …). Anything else (an ``int`` card number, a list, None) raises ``TypeError``
    naming its type: ``bytes(4111)`` would be 4,111 zero bytes, not the number."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytes):
        return data
    try:
        return memoryview(data).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be str or bytes-like, not {type(data).__name__}") from None


def as_ciphertext(value: object) -> str:
    """A ciphertext string (an ``Encrypted`` is one); anything else raises ``TypeError`` naming its type."""
    if isinstance(value, str):
        return str.__str__(value)
    raise TypeError(f"ciphertext must be str, not {type(value).__name__}")


def context_json(context: object) -> dict[str, str] | None:
    """An encryption context as the API's plain ``dict`` (None for no context).

    The context must be a mapping of ``str`` to ``str``: anything else is a ``TypeError`` naming
    what is wrong (a non-mapping, or the key and the type of a non-``str`` key or value). Nothing
    is converted, since a context ``{"customer": 42}`` turned into ``{"customer": "42"}`` (or
    ``None`` into ``"None"``) would decrypt under a context the caller never wrote.
    """
    if context is None:
        return None
    if not isinstance(context, Mapping):
        raise TypeError(f"an encryption context must be a mapping of str to str, not {type(context).__name__}")
    out: dict[str, str] = {}
    for name, value in context.items():
        if not isinstance(name, str):
            raise TypeError(f"encryption context key {name!r} must be str, not {type(name).__name__}")
        if not isinstance(value, str):
            raise TypeError(f"encryption context value of {name!r} must be str, not {type(value).__name__}")
        out[name] = value
    return out


def policy_json(policy: Policy | Mapping[str, Sequence[str] | str] | None) -> dict[str, Any] | None:
    """A policy given as ``Policy`` or as the API's plain mapping, in the API shape."""
    if policy is None:
        return None
    if isinstance(policy, Policy):
        return policy.to_json()
    return dict(policy)
