"""Who may do what: the one rule of roles, for every door and for the core.

Every request a door serves names its action — the action its audit record names too: a REST
route's (``@audited("key.create")``), ``kms.<Operation>`` for the AWS KMS API, and so on for
each door to come. :data:`RIGHTS` gives each action the :class:`Right` it needs, and
:data:`ROLES` the roles that hold each right; a door authenticates its caller, then asks
:func:`authorize` and translates the refusal (``Forbidden``) into its protocol's error (REST's
403 ``forbidden``, the KMS API's ``AccessDeniedException``). It writes no role of its own
(``tests/test_rules.py`` holds that line).

Whether an action's requests are audited is this module's say too (:data:`UNAUDITED`). So is every
other fact about a role the core needs: who sees and manages every key (:attr:`Right.EVERY_OBJECT`),
whom a key's policy may name (:attr:`Right.NAMED_BY_POLICY`), who may be given ``create_keys``
(:func:`grantable`), through which doors a role authenticates (:data:`DOORS`), whom an approval rule
may name (:attr:`Right.APPROVE`). No other module compares a role.

An action missing from the table is refused to everyone (default deny). What a principal may
do with one key is not decided here but by the key's policy, in the services that use keys
(``services/key_use.py``, ``KeyService.get``): :attr:`Right.KEY_POLICY` lets every role through
to that check (an auditor is refused there: it never uses a key).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from keymanager.domain.models import Door, Principal, Role
from keymanager.errors import Forbidden


class Right(enum.Enum):
    """What an action needs of its caller's role."""

    MANAGE = "manage keys, principals and access keys"
    READ_LOG = "read the audit log, the metrics, the key inventory and the service's facts"
    RANDOM = "draw random bytes from the HSM"
    SELF = "learn who it is (its own name and role)"
    CATALOG = "learn what the service offers (the table of key types)"
    KEY_STORE = "serve AWS KMS as an external key store (which keys: their policies)"
    KEY_POLICY = "whatever the key's policy grants (decided per key)"
    CREATE_OWNED = "create keys and objects it then owns (admins; a principal given create_keys)"
    MANAGE_OWNED = "manage the keys and objects it owns (decided per key: require_owner)"
    DIGEST = "compute a digest, touching no key (the Vault Transit API's hash)"
    APPROVE = "see, approve and deny approval requests (dual control; whom a rule names is decided per request)"
    EVERY_OBJECT = "see and manage every key and object, whoever owns it and whomever its policy names"
    NAMED_BY_POLICY = "be named by a key's policy, and so use the key as the policy grants"


ROLES: Mapping[Right, tuple[Role, ...]] = {
    Right.MANAGE: (Role.ADMIN,),
    Right.READ_LOG: (Role.AUDITOR, Role.ADMIN),
    Right.RANDOM: (Role.ADMIN, Role.APP),
    Right.SELF: (Role.ADMIN, Role.APP, Role.AUDITOR),
    Right.CATALOG: (Role.ADMIN, Role.APP, Role.AUDITOR),
    Right.KEY_STORE: (Role.XKS,),
    Right.KEY_POLICY: (Role.ADMIN, Role.APP, Role.AUDITOR),
    Right.CREATE_OWNED: (Role.ADMIN,),
    Right.MANAGE_OWNED: (Role.ADMIN, Role.APP),
    Right.DIGEST: (Role.ADMIN, Role.APP),
    Right.APPROVE: (Role.ADMIN, Role.AUDITOR),
    Right.EVERY_OBJECT: (Role.ADMIN,),
    Right.NAMED_BY_POLICY: (Role.ADMIN, Role.APP, Role.XKS),
}
"""The roles holding each right: the only place a role is written down, for a door or for the core
(``tests/test_rules.py`` holds that line). An approval rule naming no approver means the roles
holding :attr:`Right.MANAGE`; the roles a rule may name hold :attr:`Right.APPROVE`."""
GRANTED: Mapping[Right, tuple[Role, ...]] = {Right.CREATE_OWNED: (Role.APP,)}
"""Rights a principal of these roles holds only when it was given them one by one (the principal's
``create_keys`` flag, set by an admin): no one else's keys change, it owns what it creates. Given to a
role that holds the right already, it changes nothing; to a role in neither table, it is refused."""
DOORS: Mapping[Role, frozenset[Door]] = {
    Role.ADMIN: frozenset({Door.REST, Door.KMS}),
    Role.APP: frozenset({Door.REST, Door.KMS}),
    Role.AUDITOR: frozenset({Door.REST, Door.KMS}),
    Role.XKS: frozenset({Door.XKS}),
}
"""The doors a principal of each role authenticates through: a key store (role ``xks``) only through
the XKS door (its access keys follow AWS's rules for XKS credentials; its bearer token authenticates
nothing), which admits nobody else."""

_REST_MANAGE = (
    "principal.create",
    "principal.list",
    "principal.delete",
    "access_key.create",
    "access_key.list",
    "access_key.delete",
    "key.create",
    "key.update",
    "key.rotate",
    "key.schedule_deletion",
    "key.cancel_deletion",
    "key.import_parameters",
    "key.import",
)
_REST_KEY_POLICY = (
    "key.list",
    "key.read",
    "key.encrypt",
    "key.decrypt",
    "key.generate_data_key",
    "key.reencrypt",
    "key.encrypt_batch",
    "key.decrypt_batch",
    "key.mac",
    "key.mac_verify",
    "key.encrypt_stream",
    "key.decrypt_stream",
    "key.tokenize",
    "key.detokenize",
    "key.tokenize_batch",
    "key.detokenize_batch",
    "key.public_key",
    "key.sign",
    "key.verify",
    "key.derive_shared_secret",
    "key.datakey_pair",
)
_REST_READ_LOG = ("audit.read", "audit.verify", "metrics.read", "key.inventory", "key.hsm_objects", "service.read")
_KMS_MANAGE = (
    "CreateKey",
    "EnableKey",
    "DisableKey",
    "UpdateKeyDescription",
    "ScheduleKeyDeletion",
    "CancelKeyDeletion",
    "CreateAlias",
    "UpdateAlias",
    "DeleteAlias",
    "EnableKeyRotation",
    "DisableKeyRotation",
    "RotateKeyOnDemand",
    "GetKeyRotationStatus",
    "ListKeyRotations",
    "PutKeyPolicy",
    "GetKeyPolicy",
    "ListKeyPolicies",
    "TagResource",
    "UntagResource",
    "ListResourceTags",
    "ListGrants",
)
_KMS_KEY_POLICY = (
    "DescribeKey",
    "ListKeys",
    "ListAliases",
    "Encrypt",
    "Decrypt",
    "ReEncrypt",
    "GenerateDataKey",
    "GenerateDataKeyWithoutPlaintext",
    "GenerateMac",
    "VerifyMac",
    "Sign",
    "Verify",
    "GetPublicKey",
    "DeriveSharedSecret",
    "GenerateDataKeyPair",
    "GenerateDataKeyPairWithoutPlaintext",
)
_XKS = ("GetKeyMetadata", "Encrypt", "Decrypt", "GetHealthStatus")
_KMIP_CREATE = ("Create", "CreateKeyPair", "Register")
_KMIP_MANAGE = ("Activate", "Revoke", "Destroy", "AddAttribute", "ModifyAttribute", "DeleteAttribute", "SetAttribute")
_KMIP_KEY_POLICY = (
    "Get",
    "GetAttributes",
    "GetAttributeList",
    "Locate",
    "Encrypt",
    "Decrypt",
    "MAC",
    "MACVerify",
    "Sign",
    "SignatureVerify",
)
_KMIP_ANYONE = ("Query", "DiscoverVersions")
_TRANSIT_MANAGE = ("key_create", "key_config", "key_rotate", "key_delete", "key_trim")
_TRANSIT_KEY_POLICY = (
    "key_read",
    "key_list",
    "export",
    "encrypt",
    "decrypt",
    "rewrap",
    "datakey",
    "hmac",
    "sign",
    "verify",
)

RIGHTS: Mapping[str, Right] = {
    **dict.fromkeys(_REST_MANAGE, Right.MANAGE),
    **dict.fromkeys(_REST_KEY_POLICY, Right.KEY_POLICY),
    **dict.fromkeys(_REST_READ_LOG, Right.READ_LOG),
    **{f"kms.{operation}": Right.MANAGE for operation in _KMS_MANAGE},
    **{f"kms.{operation}": Right.KEY_POLICY for operation in _KMS_KEY_POLICY},
    "kms.GenerateRandom": Right.RANDOM,
    "principal.whoami": Right.SELF,
    "key_spec.list": Right.CATALOG,
    **{
        f"xks.{operation}": Right.KEY_STORE for operation in ("GetKeyMetadata", "Encrypt", "Decrypt", "GetHealthStatus")
    },
    **{f"kmip.{operation}": Right.CREATE_OWNED for operation in _KMIP_CREATE},
    "kmip.CreateExportable": Right.MANAGE,  # a key whose material may leave: an admin's choice
    **{f"kmip.{operation}": Right.MANAGE_OWNED for operation in _KMIP_MANAGE},
    **{f"kmip.{operation}": Right.KEY_POLICY for operation in _KMIP_KEY_POLICY},
    **{f"kmip.{operation}": Right.SELF for operation in _KMIP_ANYONE},
    # the objects that are not keys, over REST: seen as over KMIP (managed_objects.visible), destroyed by their managers
    **dict.fromkeys(("object.list", "object.get"), Right.KEY_POLICY),
    "object.destroy": Right.MANAGE_OWNED,
    **dict.fromkeys(("approle.create", "approle.list", "approle.delete"), Right.MANAGE),
    **dict.fromkeys(("approval.list", "approval.read", "approval.approve", "approval.deny"), Right.APPROVE),
    "approval.rules_read": Right.READ_LOG,
    "approval.rules_update": Right.MANAGE,
    **{f"transit.{operation}": Right.MANAGE for operation in _TRANSIT_MANAGE},
    **{f"transit.{operation}": Right.KEY_POLICY for operation in _TRANSIT_KEY_POLICY},
    "transit.random": Right.RANDOM,
    "transit.hash": Right.DIGEST,
    "transit.login": Right.SELF,
    "transit.lookup_self": Right.SELF,
}
"""The right each action of each door needs."""


UNAUDITED: frozenset[str] = frozenset(
    {
        "audit.read",
        "audit.verify",
        "metrics.read",
        "service.read",
        "key_spec.list",
        "xks.GetHealthStatus",
    }
)
"""The actions whose requests owe no audit record of their answer: reading the audit log, the metrics,
the service's overview and the table of key types, and XKS's health call. Every other action is
audited, whatever its door (``services/audit_log.py`` ``AuditLog.owed`` takes what :func:`audited`
says)."""

UNAUDITED_SUCCESSES: frozenset[str] = frozenset({"kmip.DiscoverVersions", "kmip.Query"})
"""The actions whose successes owe no audit record, but whose refusals do: KMIP's discovery calls."""


def audited(action: str, *, refused: bool = False) -> bool:
    """Whether a request of ``action``, ``refused`` or not, owes the audit record of its answer
    (:data:`UNAUDITED`, :data:`UNAUDITED_SUCCESSES`)."""
    return action not in UNAUDITED and (refused or action not in UNAUDITED_SUCCESSES)


def holds(role: Role, right: Right) -> bool:
    """Whether every principal of ``role`` holds ``right`` (:data:`ROLES`; not counting :data:`GRANTED`)."""
    return role in ROLES[right]


def grantable(role: Role, right: Right) -> bool:
    """Whether a principal of ``role`` may be given ``right`` one by one (:data:`GRANTED`), or holds it anyway."""
    return holds(role, right) or role in GRANTED.get(right, ())


def admits(door: Door, role: Role) -> bool:
    """Whether a principal of ``role`` may authenticate through ``door`` (:data:`DOORS`)."""
    return door in DOORS[role]


def authorize(principal: Principal, action: str) -> Principal:
    """``principal``, if its role holds the right ``action`` needs; else Forbidden (also for an
    action the table does not know)."""
    right = RIGHTS.get(action)
    if right is None:
        raise Forbidden("this action is not open to any role")
    roles = ROLES[right]
    if holds(principal.role, right) or (principal.create_keys and grantable(principal.role, right)):
        return principal
    if right in GRANTED:
        raise Forbidden(f"this needs the role {' or '.join(r.value for r in roles)}, or a principal given create_keys")
    raise Forbidden(f"this needs the role {' or '.join(r.value for r in roles)}")


def require_owner(principal: Principal, owner_id: str | None) -> Principal:
    """``principal``, if it may manage an object (a key, a registered secret) whose owner is
    ``owner_id`` (None: made by an admin, not through a principal's own right): an admin manages
    everything, anyone else only what it owns; else Forbidden (:attr:`Right.MANAGE_OWNED`)."""
    if holds(principal.role, Right.EVERY_OBJECT) or (owner_id is not None and principal.id == owner_id):
        return principal
    raise Forbidden("only the principal that created this object, or an admin, may manage it")


def may_see(principal: Principal, owner_id: str | None, named: bool) -> bool:
    """Whether ``principal`` may see an object (a registered secret) whose owner is ``owner_id`` and
    whose policy names it (``named``): an admin sees every object, anyone else what it owns or is
    named on (what it may then do with it is the policy's and :func:`require_owner`'s say)."""
    mine = owner_id is not None and principal.id == owner_id
    return holds(principal.role, Right.EVERY_OBJECT) or mine or named
