"""HSM orphans in the database: when each unreferenced ``km/`` token object was first seen so.

An object's age cannot be read from the token (PKCS#11 has no creation time SoftHSM keeps),
so the maintenance task remembers here when it first saw each label that no key version
names; an object first seen unreferenced at ``t`` is at least ``now - t`` old. Destruction is
recorded by a conditional update in the transaction of its audit record: however many
processes or replicas sweep at once, one records each orphan.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import sessionmaker

from keymanager.db.audit import append as append_audit
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import HsmOrphanRow, KeyVersionRow
from keymanager.domain.audit import AuditEntry, ChainKey


class OrphanStore:
    """The ``hsm_orphans`` table and the labels key versions name, over one engine."""

    def __init__(self, engine: Engine, *, audit_key: ChainKey | None = None) -> None:
        """``audit_key`` seals the audit record of each destroyed object (see ``keymanager.db.audit``)."""
        self._engine = engine
        self._audit_key = audit_key
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def referenced_labels(self) -> set[str]:
        """Every HSM label a key version names (secret, private and public key objects; destroyed keys' included)."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            rows = session.execute(
                select(
                    KeyVersionRow.enc_label,
                    KeyVersionRow.mac_label,
                    KeyVersionRow.private_label,
                    KeyVersionRow.public_label,
                )
            ).all()
        return {label for row in rows for label in row if label is not None}

    def observe(self, unreferenced: Collection[str], now: datetime) -> None:
        """Note ``now`` as first seen for each label of ``unreferenced`` not noted yet, and forget
        the pending labels that are no longer in it (referenced meanwhile, or gone)."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            pending = set(session.scalars(select(HsmOrphanRow.label).where(HsmOrphanRow.destroyed_at.is_(None))))
            gone = pending - set(unreferenced)
            if gone:
                session.execute(delete(HsmOrphanRow).where(HsmOrphanRow.label.in_(gone)))
            new = [{"label": label, "first_seen_at": now} for label in unreferenced if label not in pending]
            if new:
                session.execute(self._insert_new(), new)

    def due(self, cutoff: datetime) -> list[str]:
        """Labels first seen unreferenced at or before ``cutoff`` and not recorded destroyed."""
        due = (HsmOrphanRow.first_seen_at <= cutoff) & HsmOrphanRow.destroyed_at.is_(None)
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            return list(session.scalars(select(HsmOrphanRow.label).where(due).order_by(HsmOrphanRow.label)))

    def mark_destroyed(self, label: str, now: datetime, *, record: AuditEntry) -> bool:
        """Record ``label`` destroyed with ``record``; True for the one caller that did it."""
        pending = (HsmOrphanRow.label == label) & HsmOrphanRow.destroyed_at.is_(None)
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            result = session.execute(update(HsmOrphanRow).where(pending).values(destroyed_at=now))
            if cast("CursorResult[Any]", result).rowcount != 1:
                return False
            append_audit(session.connection(), [record], self._audit_key)
            return True

    def prune(self, before: datetime) -> None:
        """Forget orphans recorded destroyed before ``before``."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            session.execute(delete(HsmOrphanRow).where(HsmOrphanRow.destroyed_at < before))

    def _insert_new(self) -> Any:
        """An INSERT that leaves a label another process noted meanwhile as it is."""
        if self._engine.dialect.name == "postgresql":
            return postgresql.insert(HsmOrphanRow).on_conflict_do_nothing(index_elements=["label"])
        return sqlite.insert(HsmOrphanRow).on_conflict_do_nothing(index_elements=["label"])
