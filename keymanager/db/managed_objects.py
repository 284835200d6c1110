"""The managed objects that are not keys (the table ``kmip_objects``): stored, read, changed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from keymanager import errors
from keymanager.db.changes import record_change, rowcount, sessions
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import ManagedObjectRow
from keymanager.domain.audit import AuditEntry, ChainKey
from keymanager.domain.managed_objects import ManagedObject
from keymanager.domain.models import Lifecycle
from keymanager.domain.policy import Policy


class ManagedObjectStore:
    """Registered objects over one engine; safe to share between threads. Every change bumps the
    metadata version and commits its audit record in its transaction (``db/changes.py``)."""

    def __init__(self, engine: Engine, *, audit_key: ChainKey | None = None) -> None:
        self._sessions = sessions(engine, audit_key)

    def add(self, found: ManagedObject, *, record: AuditEntry | None) -> None:
        """Store a new object (and ``record``)."""
        with self._transaction() as session:
            session.add(
                ManagedObjectRow(
                    id=found.id,
                    object_type=found.object_type,
                    state=found.state.value,
                    owner_id=found.owner_id,
                    policy=found.policy.to_dict(),
                    attributes=dict(found.attributes),
                    sealed=found.sealed,
                    seal_label=found.seal_label,
                    created_at=found.created_at,
                    updated_at=found.updated_at,
                )
            )
            session.flush()
            record_change(session, record)

    def get(self, object_id: str) -> ManagedObject | None:
        """The object ``object_id``, if there is one."""
        with self._transaction() as session:
            row = session.get(ManagedObjectRow, object_id)
            return None if row is None else _object(row)

    def all(self) -> list[ManagedObject]:
        """Every object, newest first."""
        with self._transaction() as session:
            rows = session.scalars(select(ManagedObjectRow).order_by(ManagedObjectRow.created_at.desc())).all()
            return [_object(row) for row in rows]

    def change(
        self,
        found: ManagedObject,
        *,
        state: Lifecycle | None = None,
        attributes: Mapping[str, Any] | None = None,
        destroy: bool = False,
        record: AuditEntry | None,
    ) -> ManagedObject:
        """Change the state or attributes of ``found`` if it is still as read (else
        PreconditionFailed); ``destroy`` drops its sealed value. The object as changed."""
        values: dict[str, Any] = {"updated_at": max(datetime.now(UTC), found.updated_at)}
        if state is not None:
            values["state"] = state.value
        if attributes is not None:
            values["attributes"] = dict(attributes)
        if destroy:
            values["sealed"] = None
        current = (ManagedObjectRow.id == found.id) & (ManagedObjectRow.updated_at == found.updated_at)
        with self._transaction() as session:
            if not rowcount(session, update(ManagedObjectRow).where(current).values(**values)):
                raise errors.PreconditionFailed("the object changed meanwhile")
            record_change(session, record)
        return replace(
            found,
            state=found.state if state is None else state,
            attributes=found.attributes if attributes is None else dict(attributes),
            sealed=None if destroy else found.sealed,
            updated_at=values["updated_at"],
        )

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            yield session


def _object(row: ManagedObjectRow) -> ManagedObject:
    return ManagedObject(
        id=row.id,
        object_type=row.object_type,
        state=Lifecycle(row.state),
        owner_id=row.owner_id,
        policy=Policy.from_dict(row.policy),
        attributes=row.attributes,
        sealed=row.sealed,
        seal_label=row.seal_label,
        created_at=_utc(row.created_at),
        updated_at=_utc(row.updated_at),
    )


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
