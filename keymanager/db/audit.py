"""The audit log in the database: appending to the hash chain, reading, verifying.

Appending locks the chain head row (``UPDATE audit_head … WHERE id = 1`` is the first
statement of the step), so appenders in other threads, processes or replicas wait for
each other and the chain stays single. An append can join a transaction that makes the
change it records (:func:`append`), or run in its own (:meth:`AuditStore.append`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any, cast

from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, Select, Table, bindparam, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AuditHeadRow, AuditRecordRow, MetadataVersionRow
from keymanager.domain.audit import (
    AuditEntry,
    AuditQuery,
    AuditRecord,
    ChainVerifier,
    Outcome,
    Verification,
    chain,
)

# Built once: the append runs for every request, and SQLAlchemy's statement building is
# what an append would otherwise spend most of its time on.
_HEAD = cast(Table, AuditHeadRow.__table__)
_LOCK_HEAD = update(_HEAD).where(_HEAD.c.id == 1).values(last_seq=_HEAD.c.last_seq)
_READ_HEAD = select(_HEAD.c.last_seq, _HEAD.c.last_hash).where(_HEAD.c.id == 1)
_MOVE_HEAD = update(_HEAD).where(_HEAD.c.id == 1).values(last_seq=bindparam("seq"), last_hash=bindparam("hash"))
_INSERT_RECORDS = insert(cast(Table, AuditRecordRow.__table__))
_METADATA = cast(Table, MetadataVersionRow.__table__)
_READ_VERSION = select(_METADATA.c.version).where(_METADATA.c.id == 1)


def append(connection: Connection, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
    """Append ``entries`` to the chain inside ``connection``'s transaction; the records made."""
    if not entries:
        return []
    connection.execute(_LOCK_HEAD)
    last_seq, last_hash = connection.execute(_READ_HEAD).one()
    records = chain(entries, last_seq, last_hash)
    connection.execute(_INSERT_RECORDS, [_row_values(r) for r in records])
    connection.execute(_MOVE_HEAD, {"seq": records[-1].seq, "hash": records[-1].hash})
    return records


class AuditStore:
    """Reads and appends audit records over one engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def append(self, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Append ``entries`` in one transaction of their own."""
        with connection_errors_as_unavailable(), self._engine.begin() as connection:
            return append(connection, entries)

    def append_current(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """Append, in one transaction, each entry whose expected metadata version is None or current.

        Returns the current metadata version and, per item, whether it was written. A request that
        relied on cached principals or keys expects the version its cache was filled under; any
        change to a principal or key anywhere increments it (see ``Store``).
        """
        with connection_errors_as_unavailable(), self._engine.begin() as connection:
            cursor = connection.connection.cursor()
            try:
                return _append_current(cursor, _RawSql.of(connection.dialect.name), items)
            finally:
                cursor.close()

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Records matching ``query`` with ``seq > query.after``, in sequence order."""
        statement: Select[AuditRecordRow] = select(AuditRecordRow).where(AuditRecordRow.seq > query.after)
        if query.key_id is not None:
            statement = statement.where(AuditRecordRow.key_id == query.key_id)
        if query.principal is not None:
            statement = statement.where(AuditRecordRow.principal == query.principal)
        if query.action is not None:
            statement = statement.where(AuditRecordRow.action == query.action)
        if query.since is not None:
            statement = statement.where(AuditRecordRow.time >= query.since)
        statement = statement.order_by(AuditRecordRow.seq).limit(query.limit)
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            return [_record(row) for row in session.scalars(statement)]

    def verify(self, batch: int = 1000) -> Verification:
        """Walk the whole chain in sequence order and check every link and the head."""
        verifier = ChainVerifier()
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            head = session.execute(select(AuditHeadRow.last_seq, AuditHeadRow.last_hash)).one()
            for record in _walk(session, head.last_seq, batch):
                if not verifier.feed(record):
                    break
            return verifier.finish(head.last_seq, head.last_hash)


def _walk(session: Session, up_to: int, batch: int) -> Iterator[AuditRecord]:
    after = 0
    while True:
        rows = session.scalars(
            select(AuditRecordRow)
            .where(AuditRecordRow.seq > after, AuditRecordRow.seq <= up_to)
            .order_by(AuditRecordRow.seq)
            .limit(batch)
        ).all()
        if not rows:
            return
        for row in rows:
            yield _record(row)
        after = rows[-1].seq


@dataclass(frozen=True)
class _RawSql:
    """The statements of the hot append, in the driver's own dialect and parameter style.

    Every request's record goes through here, and SQLAlchemy's per-statement work would cost
    more than the database does; the values are written exactly as SQLAlchemy writes them
    (``test_audit`` reads them back through SQLAlchemy and verifies the chain on both databases).
    """

    lock: str
    version: str
    head: str
    insert: str
    move: str
    sqlite: bool

    @classmethod
    def of(cls, dialect: str) -> _RawSql:
        mark = "?" if dialect == "sqlite" else "%s"
        columns = "seq, time, request_id, principal, action, key_id, key_version, outcome, status, client, details, "
        return cls(
            lock="UPDATE audit_head SET last_seq = last_seq WHERE id = 1",
            version="SELECT version FROM metadata_version WHERE id = 1",
            head="SELECT last_seq, last_hash FROM audit_head WHERE id = 1",
            # Only parameter marks are formatted in, never values.
            insert=f"INSERT INTO audit_records ({columns}prev_hash, hash) VALUES ({', '.join([mark] * 13)})",  # noqa: S608
            move=f"UPDATE audit_head SET last_seq = {mark}, last_hash = {mark} WHERE id = 1",  # noqa: S608
            sqlite=dialect == "sqlite",
        )

    def row(self, record: AuditRecord) -> tuple[object, ...]:
        entry = record.entry
        moment: object = entry.time.astimezone(UTC)
        details: object = dict(entry.details)
        if self.sqlite:
            moment = entry.time.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            details = json.dumps(details)
        else:
            details = Jsonb(details)
        return (
            record.seq,
            moment,
            entry.request_id,
            entry.principal,
            entry.action,
            entry.key_id,
            entry.key_version,
            entry.outcome.value,
            entry.status,
            entry.client,
            details,
            record.prev_hash,
            record.hash,
        )


def _append_current(
    cursor: Any, sql: _RawSql, items: Sequence[tuple[AuditEntry, int | None]]
) -> tuple[int, list[bool]]:
    cursor.execute(sql.lock)
    cursor.execute(sql.version)
    version = int(cursor.fetchone()[0])
    accepted = [expected is None or expected == version for _, expected in items]
    entries = [entry for (entry, _), ok in zip(items, accepted, strict=True) if ok]
    if entries:
        cursor.execute(sql.head)
        last_seq, last_hash = cursor.fetchone()
        records = chain(entries, int(last_seq), str(last_hash))
        cursor.executemany(sql.insert, [sql.row(r) for r in records])
        cursor.execute(sql.move, (records[-1].seq, records[-1].hash))
    return version, accepted


def _row_values(record: AuditRecord) -> dict[str, object]:
    entry = record.entry
    return {
        "seq": record.seq,
        "time": entry.time,
        "request_id": entry.request_id,
        "principal": entry.principal,
        "action": entry.action,
        "key_id": entry.key_id,
        "key_version": entry.key_version,
        "outcome": entry.outcome.value,
        "status": entry.status,
        "client": entry.client,
        "details": dict(entry.details),
        "prev_hash": record.prev_hash,
        "hash": record.hash,
    }


def _record(row: AuditRecordRow) -> AuditRecord:
    entry = AuditEntry(
        time=row.time,
        action=row.action,
        outcome=Outcome(row.outcome),
        status=row.status,
        request_id=row.request_id,
        principal=row.principal,
        key_id=row.key_id,
        key_version=row.key_version,
        client=row.client,
        details=row.details,
    )
    return AuditRecord(seq=row.seq, entry=entry, prev_hash=row.prev_hash, hash=row.hash)
