"""A key's life: rotation (by hand or on a schedule), deletion after a waiting period, the sweeper.

Everything here is safe when several processes or replicas do it at once; the database
decides who wins. A rotation makes the new version's HSM objects (with labels unique to
that attempt) and then adds the version only if the primary version is still the one it
started from; the loser of a race destroys its own objects. The sweeper destroys the HSM
objects of every version (idempotent) and then marks the key destroyed with a conditional
update, so exactly one process records the destruction.

The orphan sweep destroys ``km/`` token objects that no key version names (a crash between
the HSM's create and the database's commit leaves them) once they have been seen unreferenced
for a grace period; objects being created right now are younger than that and never touched.
Every process may sweep; a conditional update recorded with the audit record makes one
process record each destroyed object.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from keymanager.db import Store
from keymanager.db.orphans import OrphanStore
from keymanager.domain.approvals import Guarded, Proposal
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.domain.key_specs import ObjectRole, spec_of
from keymanager.domain.models import HsmObjects, Key, KeyState, KeyVersion, Origin
from keymanager.errors import Conflict, HsmUnavailable, InvalidRequest
from keymanager.hsm import Hsm
from keymanager.services.approvals import ApprovalService, guarded
from keymanager.services.keys import destroyed_on_failure

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PENDING_DAYS = 30
MAX_PENDING_DAYS = 365
SYSTEM = "system"
"""The principal named in audit records of scheduled work."""
VERSION_LABEL = re.compile(
    r"km/(?P<key_id>[0-9a-f]{32})/v[0-9]{1,9}(?:\.[0-9a-f]{1,32})?/(?:" + "|".join(r.value for r in ObjectRole) + ")"
)
"""Labels of key-version objects (``hsm.templates.version_labels``: one per object role of the table of key
types, secret, private and public keys alike): the only ones the orphan sweep touches."""
HSM_ATTEMPTS = 3
"""Tries of an idempotent HSM call of the orphan sweep (listing, destroying one label)."""
RETRY_PAUSE = 0.05
"""Seconds before the second try of such a call (then doubled): the sweep runs off the event loop."""
ORPHAN_MEMORY_DAYS = 30
"""How long a destroyed orphan's row is kept (so a stale view of the token cannot record it twice)."""


class LifecycleService:
    """Rotation, scheduled deletion and destruction of keys."""

    def __init__(
        self,
        store: Store,
        hsm: Hsm,
        *,
        min_pending_days: int = 7,
        orphans: OrphanStore | None = None,
        orphan_grace_seconds: float = 3600.0,
        approvals: ApprovalService | None = None,
    ) -> None:
        self._store = store
        self._approvals = approvals
        self._hsm = hsm
        self._min_pending_days = min_pending_days
        self._orphans = orphans
        self._orphan_grace = timedelta(seconds=orphan_grace_seconds)
        self._next_orphan_sweep = 0.0

    def rotate(self, key: Key, *, record: AuditEntry | None = None) -> Key:
        """Make a new HSM-generated version primary. Conflict when the key is not enabled or
        another rotation of the same version won meanwhile; InvalidRequest naming the spec for an
        asymmetric key (one version, never rotated, as AWS)."""
        if spec_of(key.algorithm).asymmetric:
            raise InvalidRequest(f"a {key.algorithm} key has one version: asymmetric keys are not rotated")
        if key.state is not KeyState.ENABLED:
            raise Conflict(f"a key in state {key.state.value} cannot be rotated")
        if key.origin is Origin.EXTERNAL:
            raise Conflict("an imported key gets a new version by importing new key material")
        objects = self._hsm.generate_version(key.id, key.primary_version + 1, key.algorithm)
        return add_version(self._store, self._hsm, key, objects, record=record, what="rotation")

    @property
    def min_pending_days(self) -> int:
        """The shortest deletion window (``KM_MIN_PENDING_DAYS``), the window of KMIP's Destroy."""
        return self._min_pending_days

    def schedule_deletion(self, key: Key, pending_days: int | None, *, record: AuditEntry | None = None) -> Key:
        """Stop all use of ``key`` now and destroy it after ``pending_days`` (default 30); guarded as
        ``key.delete`` (every door's deletion passes here)."""
        days = DEFAULT_PENDING_DAYS if pending_days is None else pending_days
        if not self._min_pending_days <= days <= MAX_PENDING_DAYS:
            raise InvalidRequest(f"pending_days must be between {self._min_pending_days} and {MAX_PENDING_DAYS}")
        entry = replace(record, key_id=key.id, details={**record.details, "pending_days": days}) if record else None
        proposal = Proposal((Guarded.KEY_DELETE,), key.id, {"pending_days": days}, key.id)
        with guarded(self._approvals, proposal, record):
            return self._store.schedule_deletion(key.id, datetime.now(UTC) + timedelta(days=days), record=entry)

    def cancel_deletion(self, key: Key, *, record: AuditEntry | None = None) -> Key:
        """Return a key pending deletion to ``disabled`` (as AWS KMS does)."""
        entry = replace(record, key_id=key.id) if record else None
        return self._store.cancel_deletion(key.id, now=datetime.now(UTC), record=entry)

    def sweep(self, now: datetime | None = None) -> list[str]:
        """Destroy every key whose deletion date has come; the ids this call marked destroyed."""
        destroyed = []
        for key in self._store.keys_to_destroy(now or datetime.now(UTC)):
            for version in key.versions.values():
                self._hsm.destroy_version(version.hsm)
            if self._store.mark_destroyed(key.id, record=_system_entry("key.destroy", key)):
                log.info("key %s destroyed after its waiting period", key.id)
                destroyed.append(key.id)
        return destroyed

    def rotate_due(self, now: datetime | None = None) -> list[str]:
        """Rotate every key whose rotation period has passed; the ids this call rotated."""
        rotated = []
        moment = now or datetime.now(UTC)
        for key in self._store.keys_with_rotation_period():
            if not key.rotation_due(moment):
                continue
            try:
                self.rotate(key, record=_system_entry("key.rotate", key, scheduled=True))
            except Conflict:
                continue  # another process rotated it first
            rotated.append(key.id)
        return rotated

    def sweep_orphans(self, now: datetime | None = None) -> list[str]:
        """Destroy the key-version objects of the token that no key version names and that were
        first seen so at least the grace period ago; the labels this call recorded destroyed."""
        if self._orphans is None:
            return []
        moment = now or datetime.now(UTC)
        listed = {label for label in _retried(self._hsm.find_labels_afresh, "km/") if VERSION_LABEL.fullmatch(label)}
        unreferenced = listed - self._orphans.referenced_labels()
        self._orphans.observe(unreferenced, moment)
        destroyed = []
        for label in self._orphans.due(moment - self._orphan_grace):
            if label not in unreferenced:
                continue
            _retried(self._hsm.destroy_label, label)
            if self._orphans.mark_destroyed(label, moment, record=_orphan_entry(label)):
                log.warning("destroyed HSM object %s: no key version names it", label)
                destroyed.append(label)
        self._orphans.prune(moment - timedelta(days=ORPHAN_MEMORY_DAYS))
        return destroyed

    def sweep_orphans_when_due(self) -> list[str]:
        """:meth:`sweep_orphans` at most every quarter of the grace period (it re-reads the whole token)."""
        if time.monotonic() < self._next_orphan_sweep:
            return []
        self._next_orphan_sweep = time.monotonic() + self._orphan_grace.total_seconds() / 4
        return self.sweep_orphans()


def add_version(store: Store, hsm: Hsm, key: Key, objects: HsmObjects, *, record: AuditEntry | None, what: str) -> Key:
    """Record ``objects`` (just made in the HSM) as the next version of ``key``, made primary, and
    ``record`` naming it; the updated key. A pending import key becomes enabled. On any failure
    (Conflict when another change of the primary version won) the objects are destroyed."""
    number = key.primary_version + 1
    version = KeyVersion(key_id=key.id, version=number, hsm=objects, created_at=datetime.now(UTC))
    entry = replace(record, key_id=key.id, key_version=number) if record else None
    with destroyed_on_failure(hsm, objects, f"a failed {what} of key {key.id}"):
        return store.add_key_version(
            key.id,
            version,
            expected_primary=key.primary_version,
            record=entry,
            activate=key.state is KeyState.PENDING_IMPORT,
        )


def _retried(call: Callable[[str], T], argument: str) -> T:
    """``call(argument)`` for an idempotent HSM call, tried again after a pause (``RETRY_PAUSE``,
    doubled each time) when it answers HsmUnavailable: SoftHSM may fail to open a session while
    another process destroys objects of the token (three tries at once all failed, once, under the
    whole suite's load)."""
    for attempt in range(HSM_ATTEMPTS - 1):
        try:
            return call(argument)
        except HsmUnavailable:
            log.info("HSM call of the orphan sweep failed; trying again")
            time.sleep(RETRY_PAUSE * 2**attempt)
    return call(argument)


def _orphan_entry(label: str) -> AuditEntry:
    match = VERSION_LABEL.fullmatch(label)
    return AuditEntry(
        time=datetime.now(UTC),
        action="hsm.orphan_destroy",
        outcome=Outcome.OK,
        status=200,
        principal=SYSTEM,
        key_id=match["key_id"] if match else None,
        details={"label": label},
    )


def _system_entry(action: str, key: Key, **details: object) -> AuditEntry:
    return AuditEntry(
        time=datetime.now(UTC),
        action=action,
        outcome=Outcome.OK,
        status=200,
        principal=SYSTEM,
        key_id=key.id,
        details=details,
    )
