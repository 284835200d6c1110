"""The table of credential kinds: every way a caller shows which principal it is, one row each.

A row says the kind's stored name, how a request presents it, which doors take it (and through
which :class:`~keymanager.domain.models.Door` of the rights table a role must be admitted to hold
it, and whether such a role must hold one), the rule its value follows, the facts stored beside it
(an XKS prefix's region), where it is stored, and the prefix of its names in the
failed-authentication throttle's index (``services/credential_index.py``). The services, the store
and the index ask this table instead of knowing the kinds; a new door adds its kind here (issue 34
item 4), not columns on principals.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from keymanager.domain import xks
from keymanager.domain.access_keys import ACCESS_KEY_ID, XKS_ACCESS_KEY_ID
from keymanager.domain.models import Door, Principal

MAX_TOKEN_CHARS = 256
"""The longest bearer token (or X-Vault-Token) a door looks up."""
MAX_SUBJECT_CHARS = 1024
"""The longest certificate subject a door looks up (and a principal may be bound to)."""
MAX_ROLE_ID_CHARS = 64
"""The longest AppRole ``role_id`` the Transit door looks up."""


class Storage(enum.StrEnum):
    """Where the credentials of a kind are stored (``keymanager.db``)."""

    TOKEN_HASH = "principals.token_hash"  # noqa: S105 (a column's name, not a secret)
    """Beside the principal, as the hash of its one bearer token."""
    CREDENTIALS = "credentials"
    """A row of the ``credentials`` table: the kind, the name looked up, the principal, the facts."""
    ACCESS_KEYS = "access_keys"
    """The ``access_keys`` table, beside the sealed secret."""
    APPROLE = "approle_credentials"
    """The ``approle_credentials`` table, beside the hash of its secret id."""


@dataclass(frozen=True)
class Fact:
    """A fact stored beside a credential (in its row's ``facts``): its rule and its check."""

    rule: str
    valid: Callable[[str], bool]


@dataclass(frozen=True)
class CredentialKind:
    """One kind of credential (see the module docstring)."""

    name: str
    """The kind's name, as stored (``credentials.kind``)."""
    presented: str
    """How a request presents it."""
    doors: tuple[str, ...]
    """The doors that take it (``docs/architecture.md``'s names)."""
    admission: frozenset[Door]
    """A principal may hold it only if its role is admitted through one of these doors
    (``services/authorization.py`` ``admits``)."""
    rule: str
    """What a valid name is (the message of InvalidRequest for one that is not)."""
    valid: Callable[[str], bool]
    """Whether a name follows :attr:`rule`."""
    storage: Storage
    index_prefix: str | None
    """The prefix of its names in the throttle's index; None: never presented on its own (never indexed)."""
    refused: str = ""
    """Why a principal whose role no :attr:`admission` door admits may not hold it."""
    required: bool = False
    """Whether every principal whose role an :attr:`admission` door admits must hold one."""
    facts: Mapping[str, Fact] = field(default_factory=dict)


def _printable(longest: int) -> Callable[[str], bool]:
    return lambda name: 0 < len(name) <= longest


BEARER_TOKEN = CredentialKind(
    name="bearer_token",
    presented="Authorization: Bearer <token> (the Transit door: X-Vault-Token)",
    doors=("rest", "transit"),
    admission=frozenset({Door.REST}),
    rule=f"a bearer token is 1-{MAX_TOKEN_CHARS} characters",
    valid=_printable(MAX_TOKEN_CHARS),
    storage=Storage.TOKEN_HASH,
    index_prefix="t:",
)
CERTIFICATE_SUBJECT = CredentialKind(
    name="certificate_subject",
    presented="the RFC 4514 subject of a verified TLS client certificate",
    doors=("rest", "kmip"),
    admission=frozenset({Door.REST}),
    rule=f"cert_subject is 1-{MAX_SUBJECT_CHARS} characters (an RFC 4514 subject)",
    valid=_printable(MAX_SUBJECT_CHARS),
    storage=Storage.CREDENTIALS,
    index_prefix="s:",
    refused="a key store (role xks) authenticates with access keys, not a certificate",
)
SIGV4_ACCESS_KEY = CredentialKind(
    name="sigv4_access_key",
    presented="the access key id of an AWS SigV4 signature (Authorization: AWS4-HMAC-SHA256 Credential=…)",
    doors=("kms", "xks"),
    admission=frozenset({Door.KMS, Door.XKS}),
    rule="access_key_id is 16-128 characters of A-Z and 0-9 (a key store's: 20-30 of A-Z and 2-7)",
    valid=lambda name: bool(ACCESS_KEY_ID.fullmatch(name) or XKS_ACCESS_KEY_ID.fullmatch(name)),
    storage=Storage.ACCESS_KEYS,
    index_prefix="a:",
)
XKS_URI_PREFIX = CredentialKind(
    name="xks_uri_prefix",
    presented="the path prefix of an XKS request (/<prefix>/kms/xks/v1/…), signed by the key store's access key",
    doors=("xks",),
    admission=frozenset({Door.XKS}),
    rule=xks.PREFIX_RULE,
    valid=xks.is_prefix,
    storage=Storage.CREDENTIALS,
    index_prefix=None,  # it names the key store a signed request must come from: the access key is indexed
    refused="xks_uri_prefix and xks_region are for principals of role xks",
    required=True,
    facts={"region": Fact(xks.REGION_RULE, xks.is_region)},
)
APPROLE = CredentialKind(
    name="approle",
    presented="role_id and secret_id at the Transit door's POST /v1/auth/approle/login",
    doors=("transit",),
    admission=frozenset({Door.REST}),
    rule=f"role_id is 1-{MAX_ROLE_ID_CHARS} characters",
    valid=_printable(MAX_ROLE_ID_CHARS),
    storage=Storage.APPROLE,
    index_prefix="t:",  # the secret id's hash, among the tokens: it vouches for a login as a token would
)

KINDS: tuple[CredentialKind, ...] = (BEARER_TOKEN, CERTIFICATE_SUBJECT, SIGV4_ACCESS_KEY, XKS_URI_PREFIX, APPROLE)
"""Every credential kind."""


def stored_by_name() -> tuple[CredentialKind, ...]:
    """The kinds stored as rows of the ``credentials`` table."""
    return tuple(kind for kind in KINDS if kind.storage is Storage.CREDENTIALS)


@dataclass(frozen=True)
class Held:
    """A credential a principal holds, of a kind stored by name: the name it is looked up by and
    the facts stored beside it."""

    name: str
    facts: Mapping[str, str] = field(default_factory=dict)


def held_by(principal: Principal) -> dict[str, Held]:
    """The credentials of ``principal`` of the kinds stored by name (:func:`stored_by_name`), by kind name."""
    held: dict[str, Held] = {}
    if principal.cert_subject:
        held[CERTIFICATE_SUBJECT.name] = Held(principal.cert_subject)
    if principal.xks_uri_prefix is not None:
        region = principal.xks_region
        held[XKS_URI_PREFIX.name] = Held(principal.xks_uri_prefix, {} if region is None else {"region": region})
    return held


def principal_fields(held: Mapping[str, Held]) -> dict[str, str | None]:
    """The fields of :class:`~keymanager.domain.models.Principal` that show the credentials ``held``
    (as :func:`held_by` gives them): ``cert_subject``, ``xks_uri_prefix``, ``xks_region``."""
    subject, prefix = held.get(CERTIFICATE_SUBJECT.name), held.get(XKS_URI_PREFIX.name)
    return {
        "cert_subject": None if subject is None else subject.name,
        "xks_uri_prefix": None if prefix is None else prefix.name,
        "xks_region": None if prefix is None else prefix.facts.get("region"),
    }
