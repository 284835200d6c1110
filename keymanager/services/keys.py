"""Keys: creation (atomic across HSM and database), look-up with visibility rules, updates.

Policies come in and go out naming principals by name; a stored :class:`Key`'s policy names
them by id (see :mod:`keymanager.domain.policy`). :meth:`KeyService.create` and
:meth:`KeyService.update` take policies by name, :meth:`KeyService.named` turns stored
policies back into names. Only ``app`` and ``admin`` principals may be named: an auditor
reads the audit log and never uses a key.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from keymanager.db import Store
from keymanager.domain.approvals import Guarded, Proposal, guarded_update
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credentials import new_id
from keymanager.domain.kms import KeyAlias
from keymanager.domain.models import (
    HsmObjects,
    Key,
    KeyState,
    Lifecycle,
    Origin,
    Principal,
)
from keymanager.domain.policy import Policy
from keymanager.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    KeyManagerError,
    KeyNotFound,
    PreconditionFailed,
)
from keymanager.hsm import Hsm
from keymanager.services.approvals import ApprovalService, guarded
from keymanager.services.authorization import Right, holds
from keymanager.services.key_creation import InitialFacts, NewKey, checked_usage, first_version, new_key
from keymanager.services.snapshot import Snapshot

log = logging.getLogger(__name__)

_NOT_SWITCHABLE = (KeyState.PENDING_DELETION, KeyState.DESTROYED, KeyState.PENDING_IMPORT)
MAX_NAMES = 10_000
"""Principal names remembered per process (see :meth:`KeyService.named`)."""


class Unnameable(enum.Enum):
    """Why a key policy cannot name a principal."""

    MISSING = "no principal has this name"
    AUDITOR = "an auditor never uses a key"


def _unnameable(names: Collection[str], found: Mapping[str, Principal]) -> dict[str, Unnameable]:
    """Of ``names``, those a policy cannot name (``found``: the principals that exist, by name)."""
    refused = {}
    for name in names:
        principal = found.get(name)
        if principal is None:
            refused[name] = Unnameable.MISSING
        elif not holds(principal.role, Right.NAMED_BY_POLICY):
            refused[name] = Unnameable.AUDITOR
    return refused


@dataclass(frozen=True)
class LifecycleChange:
    """What an operation changes of a key's lifecycle (None: kept): its state, lifecycle state and
    attributes (KMIP's Activate, Revoke, Destroy, attribute operations); :meth:`KeyService.change_lifecycle`."""

    state: KeyState | None = None
    lifecycle: Lifecycle | None = None
    attributes: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ShownKey:
    """A key as the API shows it: with its policy naming principals by name."""

    key: Key
    policy: Policy


class KeyService:
    """Key management on behalf of a principal."""

    def __init__(self, store: Store, hsm: Hsm, *, approvals: ApprovalService | None = None) -> None:
        self._store = store
        self._hsm = hsm
        self.approvals = approvals
        """The gate of guarded operations (dual control); None only for a service built without one."""
        self._names: dict[str, str] = {}
        """Principal id to name. Both never change (no rename; ids are random and never reused), and a
        deleted principal leaves every policy in the same transaction, so an entry is never wrong."""

    def create(self, new: NewKey, *, record: AuditEntry | None = None, initial: InitialFacts | None = None) -> Key:
        """Generate version 1 in the HSM and record the key ``new`` (with ``record``); on any failure neither remains.

        ``initial``: what the key starts with (a KMIP client's Create or Register, ``doors/kmip/``;
        an exportable transit key): a key made pre-active is disabled until it is activated, with its
        attributes.

        ``new.usage`` is the key's usage (None: its spec's default; an RSA key must name one), checked
        against the table of key types; an asymmetric key's version is a private and a public key
        generated in the HSM (its public key kept as DER SubjectPublicKeyInfo), refused by name
        (UnsupportedByHsm) when the HSM lacks what the spec and usage need.
        ``new.token_format`` is required for ``FF1_AES_256`` and refused for other algorithms.
        ``new.origin`` external makes a key in state ``pending_import`` with no version and nothing in the HSM.
        ``new.kms_auto_named``: ``new.name`` is the KMS door's name for a key without an alias, a form
        (``kms-`` and 32 hex digits) no other name may take.
        Raises InvalidRequest for a bad name or format or a policy naming a principal that does not exist
        or is an auditor, Conflict for a taken name, HsmUnavailable
        or DatabaseUnavailable when a part does not answer.
        """
        usage = checked_usage(new)
        policy = self._by_id(new.policy or Policy())
        if self._store.get_key(new.name) is not None:
            raise Conflict("a key with this name exists")
        external = new.origin is Origin.EXTERNAL
        if external and new.rotation_period_days:
            raise InvalidRequest("an imported key rotates by importing new key material, not on a schedule")
        if external:
            self._hsm.require(new.algorithm.value)  # as generate_version does: refused by name when the HSM lacks it
        now = datetime.now(UTC)
        key_id = new_id()
        objects, public_key = first_version(self._hsm, key_id, new, usage, initial)
        key = new_key(key_id, new, policy, usage, objects, public_key, now)
        if initial is not None:
            key = initial.applied(key)
        with destroyed_on_failure(self._hsm, objects, f"a failed creation of key {key_id}"):
            self._store.create_key(key, record=_about(record, key, key.primary_version))
        return key

    def change_lifecycle(self, key: Key, change: LifecycleChange, *, record: AuditEntry | None = None) -> Key:
        """Apply an operation's ``change`` to ``key`` (its state, lifecycle state, attributes) if the key
        is still as read (compare-and-set: else PreconditionFailed), recording ``record``. Disabling an
        enabled key (Revoke) is guarded as ``key.disable``."""
        disables = change.state is KeyState.DISABLED and key.state is KeyState.ENABLED
        state, lifecycle = change.state, change.lifecycle
        arguments = {"state": state and state.value, "lifecycle": lifecycle and lifecycle.value}
        proposal = Proposal((Guarded.KEY_DISABLE,), key.id, arguments, key.id)
        with guarded(self.approvals if disables else None, proposal, record):
            return self._store.update_key(
                key.id,
                state=change.state,
                lifecycle=change.lifecycle,
                attributes=change.attributes,
                record=_about(record, key),
                expected_updated_at=key.updated_at,
            )

    @asynccontextmanager
    async def exporting(self, key: Key, versions: Sequence[int], record: AuditEntry | None) -> AsyncIterator[None]:
        """Around handing out the material of ``key``'s ``versions``: guarded as ``key.export`` (every door
        that exports passes here)."""
        if self.approvals is None:
            yield
            return
        proposal = Proposal((Guarded.KEY_EXPORT,), key.id, {"versions": sorted(versions)}, key.id)
        async with self.approvals.aguard(proposal, record):
            yield

    def _by_id(self, policy: Policy) -> Policy:
        """``policy`` (by name) by principal id; InvalidRequest naming what cannot be named."""
        found = {p.name: p for p in self._store.principals_by_name(policy.principals())}
        refused = _unnameable(policy.principals(), found)
        unknown = sorted(name for name, why in refused.items() if why is Unnameable.MISSING)
        if unknown:
            raise InvalidRequest(f"the policy names principals that do not exist: {_listed(unknown)}")
        auditors = sorted(name for name, why in refused.items() if why is Unnameable.AUDITOR)
        if auditors:
            raise InvalidRequest(f"auditors cannot be named in a key policy: {_listed(auditors)}")
        return policy.translated({name: p.id for name, p in found.items()})

    def unnameable(self, names: Collection[str]) -> dict[str, Unnameable]:
        """The names among ``names`` that a key policy cannot name, each with the reason (for a door
        that words the refusal its own way, naming the statement: the KMS API's policy documents)."""
        return _unnameable(names, {p.name: p for p in self._store.principals_by_name(names)})

    def named(self, policies: Sequence[Policy]) -> list[Policy]:
        """Stored ``policies`` (by id) by principal name, as the API shows them (at most one query)."""
        names = self._names_of(frozenset().union(*(p.principals() for p in policies)))
        return [p.translated(names) for p in policies]

    def _known_names(self, ids: frozenset[str]) -> dict[str, str]:
        return {i: name for i in ids if (name := self._names.get(i)) is not None}

    def _names_of(self, ids: frozenset[str]) -> dict[str, str]:
        """The names of the principals ``ids`` that exist; a database read only for ids not seen yet."""
        known = self._known_names(ids)
        if len(known) < len(ids):
            found = self._store.principal_names(ids - known.keys())
            if len(self._names) + len(found) > MAX_NAMES:
                self._names.clear()
            self._names.update(found)
            known.update(found)
        return known

    def get(self, ref: str, principal: Principal) -> Key:
        """The key named or identified by ``ref`` as ``principal`` may see it.

        Admins see every key; others see a key whose policy names them, else Forbidden.
        """
        return visible(self.find(ref), principal)

    async def read(self, snapshot: Snapshot, principal: Principal, ref: str) -> ShownKey:
        """:meth:`get` through ``snapshot`` (KeyNotFound, Forbidden), with the policy by name.

        The key comes from the snapshot (validated at the audit commit, see ``run_validated``);
        names not seen before by this process cost one database read.
        """
        key = visible(await snapshot.key(ref), principal)
        ids = key.policy.principals()
        names = self._known_names(ids)
        if len(names) < len(ids):
            names = await asyncio.to_thread(self._names_of, ids)
        return ShownKey(key, key.policy.translated(names))

    async def listed(self, principal: Principal) -> list[ShownKey]:
        """:meth:`list` with each policy by name, read from the database off the event loop."""
        return await asyncio.to_thread(self._listed, principal)

    def _listed(self, principal: Principal) -> list[ShownKey]:
        keys = self.list(principal)
        return [ShownKey(k, policy) for k, policy in zip(keys, self.named([k.policy for k in keys]), strict=True)]

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
        if holds(principal.role, Right.EVERY_OBJECT):
            return keys
        return [k for k in keys if k.policy.names(principal.id)]

    def update(
        self,
        ref: str,
        *,
        description: str | None = None,
        policy: Policy | None = None,
        enabled: bool | None = None,
        min_decryption_version: int | None = None,
        record: AuditEntry | None = None,
        if_match: str | None = None,
    ) -> Key:
        """Change a key's description, policy (by name, as for :meth:`create`), enabled state or minimum
        decryption version (recording ``record``).

        With ``if_match`` (an ``If-Match`` header), only while the key is in a state it names
        (see ``Key.matches``), else ``PreconditionFailed``; the check and the change are one
        compare-and-set (``*`` only asks that the key exists). A policy naming a principal that
        does not exist, or an auditor, is ``InvalidRequest``.
        """
        key = self.find(ref)
        if if_match is not None and not key.matches(if_match):
            raise PreconditionFailed()
        if policy is not None:
            policy = self._by_id(policy)
        state = None
        if enabled is not None:
            if key.state in _NOT_SWITCHABLE or not key.versions:
                raise Conflict(f"a key in state {key.state.value} cannot be enabled or disabled")
            if enabled and key.lifecycle_state is Lifecycle.COMPROMISED:  # terminal on every door (issue 41, item 5)
                raise Conflict("a key in state compromised (revoked as compromised) is never enabled again")
            state = KeyState.ENABLED if enabled else KeyState.DISABLED
        if min_decryption_version is not None and not 1 <= min_decryption_version <= key.primary_version:
            raise InvalidRequest("min_decryption_version must be between 1 and the primary version")
        operations = guarded_update(
            was_enabled=key.state is KeyState.ENABLED, enabled=enabled, before=key.policy, after=policy
        )
        arguments = {
            "description": description,
            "policy": None if policy is None else policy.to_dict(),
            "enabled": enabled,
            "min_decryption_version": min_decryption_version,
        }
        with guarded(self.approvals if operations else None, Proposal(operations, key.id, arguments, key.id), record):
            return self._store.update_key(
                key.id,
                description=description,
                policy=policy,
                state=state,
                min_decryption_version=min_decryption_version,
                record=_about(record, key),
                expected_updated_at=key.updated_at if if_match is not None and if_match.strip() != "*" else None,
            )

    def aliases(self, key_ids: Collection[str] | None = None) -> Sequence[KeyAlias]:
        """Every name of the keys ``key_ids`` (None: of every key), each key's own name included, by name."""
        return self._store.aliases(key_ids)

    def change_aliases(
        self,
        *,
        removed: Sequence[str] = (),
        renames: Sequence[tuple[str, str]] = (),
        added: Sequence[tuple[str, str]] = (),
        limit: int | None = None,
        record: AuditEntry | None = None,
    ) -> bool:
        """One change of names (recording ``record``): how the KMS API makes, moves and drops its
        aliases (whose names it checked): aliases ``removed``, keys renamed (key id, name), aliases
        ``added`` (name, key id). False, nothing changed, when a key would hold more than ``limit``
        aliases besides its name; KeyNotFound, NotFound (no such alias), or Conflict (a taken name)."""
        return self._store.change_aliases(removed=removed, renames=renames, added=added, limit=limit, record=record)

    def set_rotation_period(self, key_id: str, days: int | None, *, record: AuditEntry | None = None) -> None:
        """Rotate key ``key_id`` every ``days`` days from now on (None: only by hand), recording ``record``."""
        self._store.set_rotation_period(key_id, days, record=record)


def _about(entry: AuditEntry | None, key: Key, version: int | None = None) -> AuditEntry | None:
    """``entry`` naming ``key`` (and ``version``)."""
    if entry is None:
        return None
    return replace(entry, key_id=key.id, key_version=version or entry.key_version)


def visible(key: Key, principal: Principal) -> Key:
    """``key``, if ``principal`` may see it: an admin, or named by its policy; else Forbidden."""
    if not holds(principal.role, Right.EVERY_OBJECT) and not key.policy.names(principal.id):
        raise Forbidden("the principal may not use this key")
    return key


@contextmanager
def destroyed_on_failure(hsm: Hsm, objects: HsmObjects | None, what: str) -> Iterator[None]:
    """Destroy ``objects`` (new HSM objects of ``what``, e.g. "a failed rotation of key …") when the
    block raises, then let the exception go on; a failed destruction is logged, the orphan sweep
    removes the objects later."""
    try:
        yield
    except BaseException:
        if objects is not None:
            try:
                hsm.destroy_version(objects)
            except KeyManagerError:
                log.error("could not remove the HSM objects of %s", what)
        raise


def _listed(names: Sequence[str]) -> str:
    """At most five names, for an error message."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
