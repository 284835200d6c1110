"""Keys: creation (atomic across HSM and database), look-up with visibility rules, updates."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

from keymanager.db import Store
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm, HsmObjects, Key, KeyState, KeyVersion, Principal, Role
from keymanager.domain.names import KEY_NAME_RULE, is_key_name
from keymanager.domain.policy import Operation, Policy
from keymanager.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    KeyManagerError,
    KeyNotFound,
    PreconditionFailed,
)
from keymanager.hsm import Hsm

log = logging.getLogger(__name__)


class KeyService:
    """Key management on behalf of a principal."""

    def __init__(self, store: Store, hsm: Hsm) -> None:
        self._store = store
        self._hsm = hsm

    def create(
        self,
        name: str,
        *,
        algorithm: Algorithm = Algorithm.AES_256_CBC_HMAC_SHA256,
        description: str = "",
        policy: Policy | None = None,
        rotation_period_days: int | None = None,
        audit: AuditEntry | None = None,
    ) -> Key:
        """Generate version 1 in the HSM and record the key (with ``audit``); on any failure neither remains.

        Raises InvalidRequest for a bad name, Conflict for a taken one, HsmUnavailable or
        DatabaseUnavailable when a part does not answer.
        """
        if not is_key_name(name):
            raise InvalidRequest(KEY_NAME_RULE)
        if self._store.get_key(name) is not None:
            raise Conflict("a key with this name exists")
        if policy is not None:
            self._require_principals(policy)
        now = datetime.now(UTC)
        key_id = new_id()
        objects = self._hsm.generate_version(key_id, 1, algorithm)
        key = Key(
            id=key_id,
            name=name,
            algorithm=algorithm,
            state=KeyState.ENABLED,
            policy=policy or Policy(),
            primary_version=1,
            min_decryption_version=1,
            created_at=now,
            updated_at=now,
            description=description,
            rotation_period_days=rotation_period_days,
            versions={1: KeyVersion(key_id=key_id, version=1, hsm=objects, created_at=now)},
        )
        try:
            self._store.create_key(key, audit=_about(audit, key, 1))
        except BaseException:
            self._discard(objects, key_id)
            raise
        return key

    def _discard(self, objects: HsmObjects, key_id: str) -> None:
        try:
            self._hsm.destroy_version(objects)
        except KeyManagerError:
            log.error("could not remove the HSM objects of key %s after a failed creation", key_id)

    def get(self, ref: str, principal: Principal) -> Key:
        """The key named or identified by ``ref`` as ``principal`` may see it.

        Admins see every key; others see a key whose policy names them, else Forbidden.
        """
        key = self.find(ref)
        if principal.role is not Role.ADMIN and not key.policy.names(principal.name):
            raise Forbidden("the principal may not use this key")
        return key

    def find(self, ref: str) -> Key:
        """The key named or identified by ``ref``; raises KeyNotFound."""
        key = self._store.get_key(ref)
        if key is None:
            raise KeyNotFound()
        return key

    def id_of(self, ref: str) -> str | None:
        """The id of the key named or identified by ``ref``; None when there is none or it cannot be told."""
        try:
            key = self._store.get_key(ref)
        except KeyManagerError:
            return None
        return None if key is None else key.id

    def list(self, principal: Principal) -> list[Key]:
        """Every key for an admin; otherwise the keys whose policy names the principal."""
        keys = self._store.list_keys()
        if principal.role is Role.ADMIN:
            return keys
        return [k for k in keys if k.policy.names(principal.name)]

    def update(
        self,
        ref: str,
        *,
        description: str | None = None,
        policy: Policy | None = None,
        enabled: bool | None = None,
        min_decryption_version: int | None = None,
        audit: AuditEntry | None = None,
        if_match: str | None = None,
    ) -> Key:
        """Change a key's description, policy, enabled state or minimum decryption version (recording ``audit``).

        With ``if_match`` (an ``If-Match`` header), only while the key is in a state it names
        (see ``Key.matches``), else ``PreconditionFailed``; the check and the change are one
        compare-and-set (``*`` only asks that the key exists). A policy naming a principal that
        does not exist is ``InvalidRequest``.
        """
        key = self.find(ref)
        if if_match is not None and not key.matches(if_match):
            raise PreconditionFailed()
        if policy is not None:
            self._require_principals(policy)
        state = None
        if enabled is not None:
            if key.state in (KeyState.PENDING_DELETION, KeyState.DESTROYED):
                raise Conflict(f"a key in state {key.state.value} cannot be enabled or disabled")
            state = KeyState.ENABLED if enabled else KeyState.DISABLED
        if min_decryption_version is not None and not 1 <= min_decryption_version <= key.primary_version:
            raise InvalidRequest("min_decryption_version must be between 1 and the primary version")
        return self._store.update_key(
            key.id,
            description=description,
            policy=policy,
            state=state,
            min_decryption_version=min_decryption_version,
            audit=_about(audit, key),
            expected_updated_at=key.updated_at if if_match is not None and if_match.strip() != "*" else None,
        )

    def _require_principals(self, policy: Policy) -> None:
        """Raise InvalidRequest naming the principals ``policy`` grants to that do not exist."""
        named = sorted(set().union(*policy.grants.values())) if policy.grants else []
        unknown = [name for name in named if self._store.principal_by_name(name) is None]
        if unknown:
            shown = ", ".join(repr(name) for name in unknown[:5]) + (" …" if len(unknown) > 5 else "")
            raise InvalidRequest(f"the policy names principals that do not exist: {shown}")


def _about(entry: AuditEntry | None, key: Key, version: int | None = None) -> AuditEntry | None:
    """``entry`` naming ``key`` (and ``version``)."""
    if entry is None:
        return None
    return replace(entry, key_id=key.id, key_version=version or entry.key_version)


def require_use(key: Key, principal: Principal, operation: Operation) -> None:
    """Raise Forbidden unless the key's policy lets ``principal`` do ``operation`` now."""
    if not key.policy.allows(operation, principal.name):
        raise Forbidden(f"the principal may not {operation.value.replace('_', ' ')} with this key")
