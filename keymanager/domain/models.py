"""Domain records: principals, keys and key versions, as the services see them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from keymanager.domain.policy import Policy
from keymanager.domain.tokens import TokenFormat

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


def admits(door: Door, role: Role) -> bool:
    """Whether a principal of ``role`` may authenticate through ``door``: a key store (role ``xks``)
    only through the XKS door, which admits nobody else."""
    return (role is Role.XKS) == (door is Door.XKS)


class Algorithm(enum.StrEnum):
    AES_256_CBC_HMAC_SHA256 = "AES_256_CBC_HMAC_SHA256"
    AES_256_GCM = "AES_256_GCM"
    HMAC_SHA256 = "HMAC_SHA256"
    FF1_AES_256 = "FF1_AES_256"
    HMAC_SHA224 = "HMAC_SHA224"
    HMAC_SHA384 = "HMAC_SHA384"
    HMAC_SHA512 = "HMAC_SHA512"


HMAC_KEY_BITS = {
    Algorithm.HMAC_SHA224: 224,
    Algorithm.HMAC_SHA256: 256,
    Algorithm.HMAC_SHA384: 384,
    Algorithm.HMAC_SHA512: 512,
}
"""The MAC algorithms (keys that only compute MACs) and the size of their secrets: as long as the digest."""


class KeyState(enum.StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"
    PENDING_DELETION = "pending_deletion"
    DESTROYED = "destroyed"
    PENDING_IMPORT = "pending_import"


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


@dataclass(frozen=True)
class HsmObjects:
    """Labels of the HSM objects of one key version (the HMAC object only for CBC+HMAC)."""

    enc_label: str | None
    mac_label: str | None


@dataclass(frozen=True)
class KeyVersion:
    key_id: str
    version: int
    hsm: HsmObjects
    created_at: datetime


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
