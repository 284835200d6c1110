"""The AWS KMS API's key management: the same ``KeyService`` and ``LifecycleService`` calls as REST.

Blocking (database, HSM key generation): the API door runs these on a worker thread. Reads
(DescribeKey, ListKeys, ListAliases) see what ``GET /v1/keys`` shows the principal; every other
operation needs the right to manage keys (``services/authorization.py``), checked before the door
calls it. Policies, tags and grants: :mod:`keymanager.doors.kms.resources`,
whose operations this class serves too. Changes are recorded with their audit entry in the same
transaction, as through REST.

Aliases are names of keys (see :mod:`keymanager.domain.kms`): CreateAlias names a key that has
no alias yet and gives a named key a further alias (up to ``kms.MAX_ALIASES_PER_KEY``);
UpdateAlias moves an alias from one key to another of the same usage (a key losing its name gets
a fresh ``kms-<hex>`` one); DeleteAlias drops a further alias, or gives the key whose name it is
a fresh ``kms-<hex>`` name. So ``alias/billing`` and ``/v1/keys/billing`` are the same key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from keymanager.db.kms import KmsStore
from keymanager.domain import kms, kms_fields, kms_policy, kms_tags
from keymanager.domain.audit import AuditEntry
from keymanager.domain.key_specs import KeyUsage, spec_of
from keymanager.domain.models import Algorithm, Key, KeyState
from keymanager.domain.policy import Policy
from keymanager.doors.kms.call import Call, page
from keymanager.doors.kms.resources import KmsKeyResources
from keymanager.errors import Conflict, KeyNotFound, NotFound
from keymanager.services.key_creation import NewKey
from keymanager.services.key_use import rights_for
from keymanager.services.keys import KeyService
from keymanager.services.lifecycle import LifecycleService

Handler = Callable[[Call, AuditEntry], dict[str, Any]]
_MAX_DESCRIPTION = 8192
_ROTATION_DAYS = (90, 2560)


class KmsKeys:
    """Key management operations of the KMS API (``reads`` and ``changes``: operation → handler)."""

    def __init__(
        self,
        keys: KeyService,
        lifecycle: LifecycleService,
        store: KmsStore,
        *,
        symmetric_default: Callable[[], Algorithm] = lambda: Algorithm.AES_256_GCM,
    ) -> None:
        self._symmetric_default = symmetric_default
        """The algorithm of a new ``SYMMETRIC_DEFAULT`` key (it follows the token; see the container)."""
        self._keys = keys
        self._lifecycle = lifecycle
        self._store = store
        self._resources = resources = KmsKeyResources(keys, store)
        self.reads: dict[str, Handler] = {
            "DescribeKey": self.describe_key,
            "ListKeys": self.list_keys,
            "ListAliases": self.list_aliases,
            "GetKeyRotationStatus": self.get_key_rotation_status,
            "ListKeyRotations": self.list_key_rotations,
            "GetKeyPolicy": resources.get_key_policy,
            "ListKeyPolicies": resources.list_key_policies,
            "ListResourceTags": resources.list_resource_tags,
            "ListGrants": resources.list_grants,
        }
        self.changes: dict[str, Handler] = {
            "CreateKey": self.create_key,
            "EnableKey": lambda call, entry: self._enable(call, entry, enabled=True),
            "DisableKey": lambda call, entry: self._enable(call, entry, enabled=False),
            "UpdateKeyDescription": self.update_key_description,
            "ScheduleKeyDeletion": self.schedule_key_deletion,
            "CancelKeyDeletion": self.cancel_key_deletion,
            "CreateAlias": self.create_alias,
            "UpdateAlias": self.update_alias,
            "DeleteAlias": self.delete_alias,
            "EnableKeyRotation": self.enable_key_rotation,
            "DisableKeyRotation": self.disable_key_rotation,
            "RotateKeyOnDemand": self.rotate_key_on_demand,
            "PutKeyPolicy": resources.put_key_policy,
            "TagResource": resources.tag_resource,
            "UntagResource": resources.untag_resource,
        }

    # -- reads ------------------------------------------------------------------------------
    def describe_key(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._keys.get(call.ref(), call.principal)
        call.noted(key.id)
        return {"KeyMetadata": kms.metadata(key, call.region, call.account)}

    def list_keys(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        keys, rest = page(call.params, self._keys.list(call.principal))
        return {"Keys": [{"KeyId": k.id, "KeyArn": call.arn(k.id)} for k in keys], **rest}

    def list_aliases(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        """The aliases of the keys the caller sees (of key ``KeyId`` when given), by name."""
        if call.params.get("KeyId") is None:
            key_ids = {k.id for k in self._keys.list(call.principal)}
        else:
            key_ids = {self._keys.get(call.ref(), call.principal).id}
        aliases = [a for a in self._keys.aliases(key_ids) if not kms.is_unaliased(a.name)]
        shown, rest = page(call.params, aliases)
        return {"Aliases": [_alias(a, call) for a in shown], **rest}

    def get_key_rotation_status(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        """Whether the key rotates, and how often. As AWS answers: ``false`` for a key that cannot
        rotate (asymmetric and HMAC keys; Enable/DisableKeyRotation refuse them) and for a key
        pending deletion (its period is kept: cancelling the deletion shows it again)."""
        key = self._admin_key(call)
        pending = key.state is KeyState.PENDING_DELETION
        rotates = _can_rotate(key) and key.rotation_period_days is not None and not pending
        answer: dict[str, Any] = {"KeyId": call.arn(key.id), "KeyRotationEnabled": rotates}
        if rotates:
            answer["RotationPeriodInDays"] = key.rotation_period_days
        return answer

    def list_key_rotations(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        """The key's versions after the first, as rotations (``RotationDate``: the version's creation)."""
        key = _rotating(self._admin_key(call))
        versions, rest = page(call.params, [key.versions[n] for n in sorted(key.versions) if n > 1], default=100)
        rotations = [{"KeyId": call.arn(key.id), "RotationDate": kms.epoch(v.created_at)} for v in versions]
        return {"Rotations": rotations, **rest}

    # -- changes ----------------------------------------------------------------------------
    def create_key(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        """A key of ``KeySpec`` (any row of the table of key types with a KMS name) and ``KeyUsage``
        (AWS's default ``ENCRYPT_DECRYPT`` where the spec allows it, else the spec's own default);
        a usage the spec does not allow is the service's ValidationException, a spec or algorithm
        the HSM lacks its UnsupportedOperationException."""
        params = call.params
        self._refuse_unsupported(params)
        tags = kms_tags.tags(params)
        spec = kms_fields.string(params, "KeySpec", limit=64)
        spec = spec or kms_fields.string(params, "CustomerMasterKeySpec", limit=64)
        spec = spec or kms.SYMMETRIC_DEFAULT
        algorithm = kms.creatable(spec)
        if algorithm is None:
            raise kms.unsupported(f"KeySpec {spec}")
        if spec == kms.SYMMETRIC_DEFAULT:
            algorithm = self._symmetric_default()
        usage = kms_fields.choice(params, "KeyUsage", KeyUsage)
        if usage is None and spec_of(algorithm).allowed(KeyUsage.ENCRYPT_DECRYPT):
            usage = KeyUsage.ENCRYPT_DECRYPT
        description = kms_fields.string(params, "Description", limit=_MAX_DESCRIPTION) or ""
        document = kms_fields.string(params, "Policy", limit=kms_policy.MAX_POLICY_CHARS)
        if document is not None:
            policy = self._resources.policy_of(document, call)
        else:
            policy = Policy(grants={op: frozenset({call.principal.name}) for op in rights_for(algorithm, usage)})
        new = NewKey(
            kms.unaliased_name(),
            algorithm=algorithm,
            usage=usage,
            description=description,
            policy=policy,
            kms_auto_named=True,
        )
        key = self._keys.create(new, record=entry)
        call.noted(key.id, 1)
        if tags:
            self._resources.add_tags(key, tags, None)
        return {"KeyMetadata": kms.metadata(key, call.region, call.account)}

    @staticmethod
    def _refuse_unsupported(params: Mapping[str, Any]) -> None:
        """UnsupportedOperationException for what CreateKey takes in AWS and this service does not make."""
        for name in ("CustomKeyStoreId", "XksKeyId"):
            if params.get(name) is not None:
                raise kms.unsupported(name)
        if params.get("MultiRegion") is True:
            raise kms.unsupported("MultiRegion")
        origin = kms_fields.string(params, "Origin", limit=32)
        if origin not in (None, "AWS_KMS"):
            raise kms.unsupported(f"Origin {origin}")

    def _enable(self, call: Call, entry: AuditEntry, *, enabled: bool) -> dict[str, Any]:
        key = self._admin_key(call)
        self._keys.update(key.id, enabled=enabled, record=entry)
        return {}

    def update_key_description(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._admin_key(call)
        description = call.params.get("Description")
        if not isinstance(description, str) or len(description) > _MAX_DESCRIPTION:
            raise kms.KmsError(
                "ValidationException", f"Description is a string of at most {_MAX_DESCRIPTION} characters"
            )
        self._keys.update(key.id, description=description, record=entry)
        return {}

    def schedule_key_deletion(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._admin_key(call)
        days = kms_fields.integer(call.params, "PendingWindowInDays", 7, 30) or 30
        pending = self._lifecycle.schedule_deletion(key, days, record=entry)
        assert pending.deletion_date is not None
        return {
            "KeyId": call.arn(key.id),
            "DeletionDate": kms.epoch(pending.deletion_date),
            "KeyState": "PendingDeletion",
            "PendingWindowInDays": days,
        }

    def cancel_key_deletion(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._admin_key(call)
        if key.state is not KeyState.PENDING_DELETION:
            raise kms.KmsError("KMSInvalidStateException", f"the key is not pending deletion ({key.state.value})")
        self._lifecycle.cancel_deletion(key, record=entry)
        return {"KeyId": call.arn(key.id)}

    def create_alias(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        name, target = self._alias_and_target(call)
        if self._keys.id_of(name) is not None:
            raise kms.KmsError("AlreadyExistsException", f"alias/{name} already exists")
        if kms.alias_of(target) is None:
            self._change_aliases(entry, target, renames=[(target.id, name)])
        else:
            self._change_aliases(entry, target, added=[(name, target.id)])
        return {}

    def update_alias(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        name, target = self._alias_and_target(call)
        current = self._keys.find(name)
        if current.id == target.id:
            return {}
        if kms.key_usage(current) != kms.key_usage(target) or kms.key_family(current) != kms.key_family(target):
            raise kms.KmsError(
                "ValidationException",
                f"alias/{name} is on a {kms.key_family(current)} {kms.key_usage(current)} key: it moves only to"
                " a key of the same type and KeyUsage",
            )
        removed, renames = ([], [(current.id, kms.unaliased_name())]) if current.name == name else ([name], [])
        if kms.alias_of(target) is None:
            self._change_aliases(entry, target, removed=removed, renames=[*renames, (target.id, name)])
        else:
            self._change_aliases(entry, target, removed=removed, renames=renames, added=[(name, target.id)])
        return {}

    def delete_alias(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        name = kms.alias_name(kms_fields.string(call.params, "AliasName", required=True, limit=256) or "")
        current = self._keys.find(name)
        call.noted(current.id)
        if current.name == name:
            self._change_aliases(entry, current, renames=[(current.id, kms.unaliased_name())])
        else:
            self._change_aliases(entry, current, removed=[name])
        return {}

    def enable_key_rotation(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._rotatable(call)
        days = kms_fields.integer(call.params, "RotationPeriodInDays", *_ROTATION_DAYS) or 365
        self._keys.set_rotation_period(key.id, days, record=replace(entry, key_id=key.id, details={"days": days}))
        return {}

    def disable_key_rotation(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._rotatable(call)
        self._keys.set_rotation_period(key.id, None, record=replace(entry, key_id=key.id))
        return {}

    def rotate_key_on_demand(self, call: Call, entry: AuditEntry) -> dict[str, Any]:
        key = self._rotatable(call)
        rotated = self._lifecycle.rotate(key, record=entry)
        call.noted(key.id, rotated.primary_version)
        return {"KeyId": call.arn(key.id)}

    # -- steps ------------------------------------------------------------------------------
    def _admin_key(self, call: Call) -> Key:
        return self._resources.admin_key(call)

    def _rotatable(self, call: Call) -> Key:
        key = _rotating(self._admin_key(call))
        if key.state is KeyState.DISABLED:
            raise kms.KmsError("DisabledException", "the key is disabled")
        if key.state is not KeyState.ENABLED:
            raise kms.KmsError("KMSInvalidStateException", f"the key is {key.state.value}")
        return key

    def _alias_and_target(self, call: Call) -> tuple[str, Key]:
        """The alias of ``AliasName`` and the key of ``TargetKeyId`` (a key id or key ARN: an alias
        names no alias, as AWS answers)."""
        name = kms.alias_name(kms_fields.string(call.params, "AliasName", required=True, limit=256) or "")
        if kms.names_alias(kms_fields.string(call.params, "TargetKeyId", required=True) or ""):
            raise kms.KmsError("ValidationException", "Aliases must refer to keys. Not aliases")
        target = self._keys.find(call.ref("TargetKeyId"))
        call.noted(target.id)
        if target.state is KeyState.DESTROYED:
            raise KeyNotFound()
        return name, target

    def _change_aliases(
        self,
        entry: AuditEntry,
        key: Key,
        *,
        removed: Sequence[str] = (),
        renames: Sequence[tuple[str, str]] = (),
        added: Sequence[tuple[str, str]] = (),
    ) -> None:
        """``KeyService.change_aliases``, its refusals in AWS's words (recorded about ``key``)."""
        try:
            done = self._keys.change_aliases(
                removed=removed,
                renames=renames,
                added=added,
                limit=kms.MAX_ALIASES_PER_KEY - 1,
                record=replace(entry, key_id=key.id),
            )
        except Conflict:
            raise kms.KmsError("AlreadyExistsException", "an alias of this name exists") from None
        except NotFound:
            raise kms.KmsError("NotFoundException", "Alias not found") from None
        if not done:
            raise kms.KmsError("LimitExceededException", f"a key holds at most {kms.MAX_ALIASES_PER_KEY} aliases")


def _can_rotate(key: Key) -> bool:
    """Whether AWS rotates keys of the kind of ``key``: symmetric keys; not HMAC keys, nor asymmetric
    keys, which have one version."""
    return not spec_of(key.algorithm).asymmetric and key.key_usage is not KeyUsage.GENERATE_VERIFY_MAC


def _rotating(key: Key) -> Key:
    """``key`` if it can rotate (:func:`_can_rotate`); UnsupportedOperationException otherwise (as AWS
    answers the operations that change or list rotations)."""
    if not _can_rotate(key):
        raise kms.unsupported(f"rotation of {kms.key_spec(key)} keys")
    return key


def _alias(alias: kms.KeyAlias, call: Call) -> dict[str, Any]:
    return {
        "AliasName": kms.ALIAS_PREFIX + alias.name,
        "AliasArn": kms.alias_arn(alias.name, call.region, call.account),
        "TargetKeyId": alias.key_id,
        "CreationDate": kms.epoch(alias.created_at),
        "LastUpdatedDate": kms.epoch(alias.updated_at),
    }
