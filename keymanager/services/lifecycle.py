"""A key's life: rotation (by hand or on a schedule), deletion after a waiting period, the sweeper.

Everything here is safe when several processes or replicas do it at once; the database
decides who wins. A rotation makes the new version's HSM objects (with labels unique to
that attempt) and then adds the version only if the primary version is still the one it
started from; the loser of a race destroys its own objects. The sweeper destroys the HSM
objects of every version (idempotent) and then marks the key destroyed with a conditional
update, so exactly one process records the destruction.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from keymanager.db import Store
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.domain.models import Key, KeyState, KeyVersion, Origin
from keymanager.errors import Conflict, InvalidRequest, KeyManagerError
from keymanager.hsm import Hsm

log = logging.getLogger(__name__)

DEFAULT_PENDING_DAYS = 30
MAX_PENDING_DAYS = 365
SYSTEM = "system"
"""The principal named in audit records of scheduled work."""


class LifecycleService:
    """Rotation, scheduled deletion and destruction of keys."""

    def __init__(self, store: Store, hsm: Hsm, *, min_pending_days: int = 7) -> None:
        self._store = store
        self._hsm = hsm
        self._min_pending_days = min_pending_days

    def rotate(self, key: Key, *, audit: AuditEntry | None = None) -> Key:
        """Make a new HSM-generated version primary. Conflict when the key is not enabled or
        another rotation of the same version won meanwhile."""
        if key.state is not KeyState.ENABLED:
            raise Conflict(f"a key in state {key.state.value} cannot be rotated")
        if key.origin is Origin.EXTERNAL:
            raise Conflict("an imported key gets a new version by importing new key material")
        number = key.primary_version + 1
        objects = self._hsm.generate_version(key.id, number, key.algorithm)
        version = KeyVersion(key_id=key.id, version=number, hsm=objects, created_at=datetime.now(UTC))
        entry = replace(audit, key_id=key.id, key_version=number) if audit else None
        try:
            return self._store.add_key_version(key.id, version, expected_primary=key.primary_version, audit=entry)
        except BaseException:
            try:
                self._hsm.destroy_version(objects)
            except KeyManagerError:
                log.error("could not remove the HSM objects of a failed rotation of key %s", key.id)
            raise

    def schedule_deletion(self, key: Key, pending_days: int | None, *, audit: AuditEntry | None = None) -> Key:
        """Stop all use of ``key`` now and destroy it after ``pending_days`` (default 30)."""
        days = DEFAULT_PENDING_DAYS if pending_days is None else pending_days
        if not self._min_pending_days <= days <= MAX_PENDING_DAYS:
            raise InvalidRequest(f"pending_days must be between {self._min_pending_days} and {MAX_PENDING_DAYS}")
        deletion_date = datetime.now(UTC) + timedelta(days=days)
        entry = replace(audit, key_id=key.id, details={**audit.details, "pending_days": days}) if audit else None
        return self._store.schedule_deletion(key.id, deletion_date, audit=entry)

    def cancel_deletion(self, key: Key, *, audit: AuditEntry | None = None) -> Key:
        """Return a key pending deletion to ``disabled`` (as AWS KMS does)."""
        entry = replace(audit, key_id=key.id) if audit else None
        return self._store.cancel_deletion(key.id, now=datetime.now(UTC), audit=entry)

    def sweep(self, now: datetime | None = None) -> list[str]:
        """Destroy every key whose deletion date has come; the ids this call marked destroyed."""
        destroyed = []
        for key in self._store.keys_to_destroy(now or datetime.now(UTC)):
            for version in key.versions.values():
                self._hsm.destroy_version(version.hsm)
            if self._store.mark_destroyed(key.id, audit=_system_entry("key.destroy", key)):
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
                self.rotate(key, audit=_system_entry("key.rotate", key, scheduled=True))
            except Conflict:
                continue  # another process rotated it first
            rotated.append(key.id)
        return rotated


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
