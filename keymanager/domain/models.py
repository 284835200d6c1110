"""Domain records: principals, keys and key versions, as the services see them."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from keymanager.domain.key_specs import HMAC_KEY_BITS, Algorithm, KeyUsage, implied_usage
from keymanager.domain.policy import Policy
from keymanager.domain.tokens import TokenFormat

__all__ = [
    "HMAC_KEY_BITS",
    "Algorithm",
    "Door",
    "HsmObjects",
    "Key",
    "KeyState",
    "KeyUsage",
    "KeyVersion",
    "Origin",
    "Principal",
    "Role",
]
"""``Algorithm``, ``KeyUsage`` and ``HMAC_KEY_BITS`` come from the table of key types
(:mod:`keymanager.domain.key_specs`); they stay importable from here."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Role(enum.StrEnum):
    ADMIN = "admin"
    APP = "app"
    AUDITOR = "auditor"
    XKS = "xks"
    """An AWS External Key Store: AWS KMS calling the XKS proxy API (see ``docs/xks.md``)."""


class Door(enum.StrEnum):
    """The protocols a principal authenticates through."""

    REST = "rest"
    """The native API: a bearer token or a TLS client certificate."""
    KMS = "kms"
    """The AWS KMS API: SigV4 with service ``kms``."""
    XKS = "xks"
    """The AWS External Key Store proxy API: SigV4 with service ``kms-xks-proxy``."""


class KeyState(enum.StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"
    PENDING_DELETION = "pending_deletion"
    DESTROYED = "destroyed"
    PENDING_IMPORT = "pending_import"


class Lifecycle(enum.StrEnum):
    """A key's lifecycle state (pre-active, active, deactivated, compromised, destroyed): KMIP is one
    door onto it, and the REST API shows it as ``kmip_state`` (``docs/kmip.md``)."""

    PRE_ACTIVE = "pre_active"
    ACTIVE = "active"
    DEACTIVATED = "deactivated"
    COMPROMISED = "compromised"
    DESTROYED = "destroyed"
    DESTROYED_COMPROMISED = "destroyed_compromised"


_LIFECYCLES = {
    KeyState.ENABLED: Lifecycle.ACTIVE,
    KeyState.DISABLED: Lifecycle.DEACTIVATED,
    KeyState.PENDING_DELETION: Lifecycle.DEACTIVATED,
    KeyState.DESTROYED: Lifecycle.DESTROYED,
    KeyState.PENDING_IMPORT: Lifecycle.PRE_ACTIVE,
}
"""The lifecycle state of each of our states, unless an operation said more (:attr:`Key.lifecycle`)."""
_REFINES = {
    KeyState.DISABLED: (Lifecycle.PRE_ACTIVE, Lifecycle.COMPROMISED),
    KeyState.PENDING_DELETION: (Lifecycle.COMPROMISED,),
    KeyState.DESTROYED: (Lifecycle.DESTROYED_COMPROMISED,),
}
"""Which lifecycle states an operation may have set on a key in each of our states: a disabled key
that was never activated is pre-active, one revoked as compromised stays compromised."""


class Origin(enum.StrEnum):
    HSM = "hsm"
    """Every version generated in the HSM."""
    EXTERNAL = "external"
    """Every version imported (see hsm/key_import.py); created in state pending_import."""


@dataclass(frozen=True)
class Principal:
    id: str
    name: str
    role: Role
    created_at: datetime
    cert_subject: str | None = None
    xks_uri_prefix: str | None = None
    """The path prefix of a key store's XKS requests (role ``xks`` only; see ``domain/xks.py``)."""
    xks_region: str | None = None
    """The AWS region a key store's requests must be signed for (role ``xks`` only; None: any)."""
    create_keys: bool = False
    """Whether the principal may create keys it then owns (``services/authorization.py``
    ``Right.CREATE_OWNED``), as KMIP clients do; admins need no such flag."""
    key_store: bool = False
    """Whether the AES keys it creates over KMIP are exportable to it (a key-store client: vSphere,
    MySQL's keyring, pg_tde, NetApp create a key, then Get it); needs ``create_keys``."""


@dataclass(frozen=True)
class HsmObjects:
    """Labels of the HSM objects of one key version: which a version has follows its spec's row
    (``key_specs.SPECS``): an AES or FF1 object (``enc_label``), an HMAC object (``mac_label``),
    or a private and a public key (``private_label``, ``public_label``)."""

    enc_label: str | None
    mac_label: str | None
    private_label: str | None = None
    public_label: str | None = None

    def labels(self) -> tuple[str, ...]:
        """Every label the version has, in a fixed order (private before public)."""
        found = (self.enc_label, self.mac_label, self.private_label, self.public_label)
        return tuple(label for label in found if label is not None)


@dataclass(frozen=True)
class KeyVersion:
    key_id: str
    version: int
    hsm: HsmObjects
    created_at: datetime
    public_key: bytes | None = None
    """The DER SubjectPublicKeyInfo of an asymmetric version (None for a symmetric one)."""


@dataclass(frozen=True)
class Key:
    id: str
    name: str
    algorithm: Algorithm
    state: KeyState
    policy: Policy
    primary_version: int
    min_decryption_version: int
    created_at: datetime
    updated_at: datetime
    description: str = ""
    rotation_period_days: int | None = None
    deletion_date: datetime | None = None
    versions: dict[int, KeyVersion] = field(default_factory=dict)
    token_format: TokenFormat | None = None
    """The token format of an ``FF1_AES_256`` key; None for every other algorithm."""
    origin: Origin = Origin.HSM
    lifecycle: Lifecycle | None = None
    """The lifecycle state an operation last set (pre-active, compromised; KMIP's Create, Activate
    and Revoke set it), where our state alone cannot tell it; see :attr:`lifecycle_state`."""
    exportable: bool = False
    """Generated in the HSM extractable (but sensitive): its material may be handed out to
    principals its policy names for ``get_key_material`` (``docs/kmip.md``). Never set afterwards."""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """The key's attributes (names, custom ``x-`` attributes, usage mask, ...), as JSON: KMIP
    clients set and read them (``doors/kmip/attributes.py``), the one door onto them so far."""

    @property
    def lifecycle_state(self) -> Lifecycle:
        """The key's lifecycle state: from its state, refined by :attr:`lifecycle`."""
        if self.lifecycle in _REFINES.get(self.state, ()):
            assert self.lifecycle is not None
            return self.lifecycle
        return _LIFECYCLES[self.state]

    usage: KeyUsage | None = None
    """The usage the key was created with; None for keys made before usages (see :attr:`key_usage`)."""

    @property
    def key_usage(self) -> KeyUsage:
        """The key's usage: the one it was created with, else its spec's (``key_specs.implied_usage``)."""
        return self.usage if self.usage is not None else implied_usage(self.algorithm)

    def version(self, number: int) -> KeyVersion | None:
        return self.versions.get(number)

    @property
    def etag(self) -> str:
        """The key's metadata version as a strong HTTP entity tag (quoted, opaque to clients).

        Every change of a key's metadata moves ``updated_at`` (a conditional change moves it
        strictly forward), so the tag names one state of the key.
        """
        stamp = self.updated_at - _EPOCH
        return f'"{stamp // timedelta(microseconds=1):x}"'

    def matches(self, if_match: str) -> bool:
        """True when an ``If-Match`` header value names this state of the key (RFC 9110: ``*``,
        or a list of entity tags compared strongly, so a weak ``W/`` tag never matches)."""
        if if_match.strip() == "*":
            return True
        return self.etag in (tag.strip() for tag in if_match.split(","))

    def rotation_due(self, now: datetime) -> bool:
        """True when the key is enabled, rotates on a schedule, and its primary version is old enough."""
        if self.state is not KeyState.ENABLED or not self.rotation_period_days:
            return False
        primary = self.versions[self.primary_version]
        return now >= primary.created_at + timedelta(days=self.rotation_period_days)
