"""The audit log in the database: appending to the hash chain, reading, verifying.

Appending locks the chain head row (``UPDATE audit_head … WHERE id = 1`` is the first
statement of the step; on SQLite the group commit takes the database's write lock with
``BEGIN IMMEDIATE`` instead), so appenders in other threads, processes or replicas wait for
each other and the chain stays single. An append can join a transaction that makes the
change it records (:func:`append`), or run in its own (:meth:`AuditRecords.append_current`, the
audit writer's group commit). Given the audit key, every append seals its last record in the
HSM, under the lock (one HMAC per group commit, see :mod:`keymanager.domain.audit`);
verification checks the seals with it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, Select, select, update
from sqlalchemy.orm import Session, sessionmaker

from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AuditHeadRow, AuditRecordRow
from keymanager.domain.audit import (
    AuditEntry,
    AuditQuery,
    AuditRecord,
    ChainKey,
    ChainVerifier,
    Outcome,
    Verification,
    chain,
    seal,
)
from keymanager.domain.checkpoint import Checkpoint


def append(connection: Connection, entries: Sequence[AuditEntry], key: ChainKey | None = None) -> list[AuditRecord]:
    """Append ``entries`` to the chain inside ``connection``'s transaction, the last one sealed
    with ``key`` (unsealed without: such a chain does not verify); the records made."""
    if not entries:
        return []
    with _cursor(connection) as (cursor, sql):
        cursor.execute(sql.lock)
        last_seq, last_hash = cursor.fetchone()
        return _append_after(cursor, sql, entries, int(last_seq), str(last_hash), key)


@dataclass(frozen=True)
class ChainTail:
    """The end of the chain as seen under its lock."""

    last_seq: int
    last_hash: str
    keyed: bool
    """Whether any record carries a seal (the chain is keyed by an audit key already)."""


class AuditRecords:
    """Reads and appends audit records over one engine; ``key`` seals appends and checks seals."""

    def __init__(self, engine: Engine, key: ChainKey | None = None) -> None:
        self._engine = engine
        self._key = key
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._writer: Any = None
        """SQLite: the connection :meth:`append_current` keeps (see there)."""
        self._writer_lock = threading.Lock()

    def append_current(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """Append, in one transaction, each entry whose expected metadata version is None or current.

        Returns the current metadata version and, per item, whether it was written. A request that
        relied on cached principals or keys expects the version its cache was filled under; any
        change to a principal or key anywhere increments it (see ``Store``).
        """
        if self._engine.dialect.name == "sqlite":
            return self._append_current_sqlite(items)
        with (
            connection_errors_as_unavailable(),
            self._engine.begin() as connection,
            _cursor(connection) as (
                cursor,
                sql,
            ),
        ):
            return _append_current(cursor, sql, items, self._key)

    def _append_current_sqlite(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """SQLite: on a connection of its own, kept, in an explicit ``BEGIN IMMEDIATE`` transaction.

        A checkout from the pool, its reset and SQLAlchemy's transaction cost about 130 µs of CPU
        per commit, more than the statements; PostgreSQL keeps the pool for its pre-ping (a
        server restart must not fail a batch). ``BEGIN IMMEDIATE`` takes the write lock first,
        waiting up to the busy timeout, as the lock statement does elsewhere.
        """
        with self._writer_lock:
            if self._writer is None:
                with connection_errors_as_unavailable():
                    writer = self._engine.raw_connection()  # with the engine's pragmas
                writer.detach()  # never back to the pool: its transactions are begun by hand, below
                writer.dbapi_connection.isolation_level = None  # type: ignore[union-attr]
                self._writer = writer
            cursor = self._writer.dbapi_connection.cursor()
            try:
                cursor.execute("BEGIN IMMEDIATE")
                try:
                    result = _append_current(cursor, _SQLITE, items, self._key)
                    cursor.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):  # none may be open any more
                        cursor.execute("ROLLBACK")
                    raise
                return result
            finally:
                cursor.close()

    def close(self) -> None:
        """Give back the connection :meth:`append_current` kept, if any."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Records matching ``query`` with ``seq > query.after`` (and ``< query.before``), in sequence
        order (descending with ``query.newest_first``)."""
        statement: Select[AuditRecordRow] = select(AuditRecordRow).where(AuditRecordRow.seq > query.after)
        if query.before is not None:
            statement = statement.where(AuditRecordRow.seq < query.before)
        if query.key_id is not None:
            statement = statement.where(AuditRecordRow.key_id == query.key_id)
        if query.principal is not None:
            statement = statement.where(AuditRecordRow.principal == query.principal)
        if query.action is not None:
            statement = statement.where(AuditRecordRow.action == query.action)
        if query.since is not None:
            statement = statement.where(AuditRecordRow.time >= query.since)
        order = AuditRecordRow.seq.desc() if query.newest_first else AuditRecordRow.seq
        statement = statement.order_by(order).limit(query.limit)
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            return [_record(row) for row in session.scalars(statement)]

    def verify(
        self, checkpoint: Checkpoint | None = None, *, unsealed_tail: bool = False, batch: int = 1000
    ) -> Verification:
        """Walk the whole chain in sequence order and check every link, every seal (in the HSM),
        the head and, when given, the ``checkpoint`` (see :class:`ChainVerifier`).

        Raises ValueError when this store has no audit key: a chain is never called intact
        without its seals checked.
        """
        if self._key is None:
            raise ValueError("verifying the audit chain needs the audit key")
        verifier = ChainVerifier(self._key, checkpoint, batch=batch, unsealed_tail=unsealed_tail)
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            head = session.execute(select(AuditHeadRow.last_seq, AuditHeadRow.last_hash)).one()
            for record in _walk(session, head.last_seq, batch):
                if not verifier.feed(record):
                    break
            return verifier.finish(head.last_seq, head.last_hash)

    def head(self) -> Checkpoint:
        """The chain head now: the last record's sequence number and chain value."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            head = session.execute(select(AuditHeadRow.last_seq, AuditHeadRow.last_hash)).one()
            return Checkpoint(int(head.last_seq), str(head.last_hash))

    def extend_locked(self, decide: Callable[[ChainTail], Sequence[AuditEntry]]) -> list[AuditRecord]:
        """In one transaction holding the chain lock, append (sealed) what ``decide`` returns for
        the chain's tail; the records made.

        Every other appender, in any process or replica, waits meanwhile: ``decide`` may use the
        HSM to do once what must be done once (create the audit key). Its exceptions roll back.
        """
        with connection_errors_as_unavailable(), self._engine.begin() as connection:
            connection.execute(update(AuditHeadRow).where(AuditHeadRow.id == 1).values(last_seq=AuditHeadRow.last_seq))
            head = connection.execute(select(AuditHeadRow.last_seq, AuditHeadRow.last_hash)).one()
            last_seal = connection.execute(
                select(AuditRecordRow.seal).where(AuditRecordRow.seq == head.last_seq)
            ).scalar_one_or_none()
            keyed = last_seal is not None or (
                connection.execute(select(AuditRecordRow.seq).where(AuditRecordRow.seal.is_not(None)).limit(1)).first()
                is not None
            )
            entries = decide(ChainTail(int(head.last_seq), str(head.last_hash), keyed))
            if not entries:
                return []
            with _cursor(connection) as (cursor, sql):
                return _append_after(cursor, sql, entries, int(head.last_seq), str(head.last_hash), self._key)


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
    """The statements of an append, in the driver's own dialect and parameter style.

    Every request's record goes through here, and SQLAlchemy's per-statement work would cost
    more than the database does; the values are written exactly as SQLAlchemy writes them
    (``test_audit`` compares them with the ORM's rows, reads them back through SQLAlchemy and
    verifies the chain on both databases). ``RETURNING`` needs SQLite 3.35 or later.
    """

    lock: str
    """Locks the chain head and reads it (``last_seq``, ``last_hash``)."""
    version: str
    head_and_version: str
    """The chain head and the metadata version in one read, for a transaction holding the
    chain's lock already (SQLite's ``BEGIN IMMEDIATE``)."""
    insert: str
    advance_head: str
    sqlite: bool

    @classmethod
    def of(cls, dialect: str) -> _RawSql:
        mark = "?" if dialect == "sqlite" else "%s"
        columns = "seq, time, request_id, principal, action, key_id, key_version, outcome, status, client, details, "
        return cls(
            lock="UPDATE audit_head SET last_seq = last_seq WHERE id = 1 RETURNING last_seq, last_hash",
            version="SELECT version FROM metadata_version WHERE id = 1",
            head_and_version="SELECT last_seq, last_hash, version FROM audit_head, metadata_version "
            "WHERE audit_head.id = 1 AND metadata_version.id = 1",
            # Only parameter marks are formatted in, never values.
            insert=f"INSERT INTO audit_records ({columns}prev_hash, hash, seal) VALUES ({', '.join([mark] * 14)})",  # noqa: S608
            advance_head=f"UPDATE audit_head SET last_seq = {mark}, last_hash = {mark} WHERE id = 1",  # noqa: S608
            sqlite=dialect == "sqlite",
        )

    def row(self, record: AuditRecord) -> tuple[object, ...]:
        """The parameters of ``record``'s row, in the order of the insert's columns."""
        entry = record.entry
        utc = entry.time.astimezone(UTC)
        moment: object = utc
        details: object
        if self.sqlite:
            # What SQLAlchemy's SQLite DATETIME stores: "YYYY-MM-DD HH:MM:SS.ffffff" in UTC, no offset.
            moment = utc.isoformat(" ", "microseconds")[:26]
            details = json.dumps(dict(entry.details))
        else:
            details = Jsonb(dict(entry.details))
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
            record.seal,
        )


_SQLITE = _RawSql.of("sqlite")
_POSTGRESQL = _RawSql.of("postgresql")


@contextmanager
def _cursor(connection: Connection) -> Iterator[tuple[Any, _RawSql]]:
    """The driver's cursor of ``connection`` (in its transaction) and the statements for its dialect."""
    cursor = connection.connection.cursor()
    try:
        yield cursor, _SQLITE if connection.dialect.name == "sqlite" else _POSTGRESQL
    finally:
        cursor.close()


def _append_current(
    cursor: Any, sql: _RawSql, items: Sequence[tuple[AuditEntry, int | None]], key: ChainKey | None
) -> tuple[int, list[bool]]:
    """Lock the chain, then append each entry whose expected metadata version is None or current.

    On SQLite the transaction holds the write lock already (``BEGIN IMMEDIATE``): one read gives
    the head and the version. Elsewhere the version is read after the lock is taken, so that it
    sees every change committed by a transaction that held the lock before.
    """
    if sql.sqlite:
        cursor.execute(sql.head_and_version)
        last_seq, last_hash, version = cursor.fetchone()
    else:
        cursor.execute(sql.lock)
        last_seq, last_hash = cursor.fetchone()
        cursor.execute(sql.version)
        (version,) = cursor.fetchone()
    version = int(version)
    accepted = [expected is None or expected == version for _, expected in items]
    entries = [entry for (entry, _), ok in zip(items, accepted, strict=True) if ok]
    _append_after(cursor, sql, entries, int(last_seq), str(last_hash), key)
    return version, accepted


def _append_after(
    cursor: Any, sql: _RawSql, entries: Sequence[AuditEntry], last_seq: int, last_hash: str, key: ChainKey | None
) -> list[AuditRecord]:
    """Append ``entries`` after the chain head ``last_seq``/``last_hash``, which this transaction
    has locked, sealing the last with ``key`` (one HMAC in the HSM per append)."""
    if not entries:
        return []
    records = chain(entries, last_seq, last_hash)
    if key is not None:
        records[-1] = seal(key, records[-1])
    cursor.executemany(sql.insert, [sql.row(record) for record in records])
    cursor.execute(sql.advance_head, (records[-1].seq, records[-1].hash))
    return records


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
    return AuditRecord(seq=row.seq, entry=entry, prev_hash=row.prev_hash, hash=row.hash, seal=row.seal)
