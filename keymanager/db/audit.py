"""The audit log in the database: its chains, appending, reading, verifying.

There is no head every writer locks. The log is made of chains (``audit_chains``, one row per
chain holding its head), each appended to by one writer at a time:

- a **writer chain** per audit writer process (:meth:`AuditRecords.append_current`, the group
  commit): opened the first time the process commits, written by that process only, never
  reused (a restarted process opens a new one). An append reads the chain's head and the
  metadata version in one statement, then writes: on PostgreSQL, one statement inserts every
  record of the group commit (arrays unnested) and moves the head, so a commit is two round
  trips however many records it holds;
- **changes chains** for the records written inside a change's own transaction
  (:func:`append`): the transaction takes the first changes chain no other transaction holds
  (``FOR UPDATE SKIP LOCKED``; on SQLite the database's write lock makes it chain 1), opening
  a new one when every one is taken, so it waits for no other writer either. Chain 1, the single
  chain of earlier versions, is the first of them (migration 0013).

Given the audit key, every append seals its last record in the HSM (one HMAC per group commit,
see :mod:`keymanager.domain.audit`); verification checks every chain and its seals with it.
Each record also gets its ``position`` in the whole log as it is stored (PostgreSQL: the
sequence ``audit_position``; SQLite: one more than the greatest, under the write lock), which
listings follow: within a chain it follows the sequence numbers, across chains the order in
which the database stored them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, Select, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AuditChainRow, AuditRecordRow
from keymanager.domain.audit import (
    AuditEntry,
    AuditQuery,
    AuditRecord,
    ChainKey,
    ChainVerifier,
    Outcome,
    Verification,
    canonical_fields,
    chain,
    genesis_hash,
    seal,
)
from keymanager.domain.checkpoint import LEGACY_CHAIN, ChainHead, Checkpoint
from keymanager.errors import DatabaseUnavailable

WRITER = "writer"
"""Kind of the chain of one audit writer process."""
CHANGES = "changes"
"""Kind of the chains of the records written in the transactions of changes."""


def append(connection: Connection, entries: Sequence[AuditEntry], key: ChainKey | None = None) -> list[AuditRecord]:
    """Append ``entries`` to a changes chain inside ``connection``'s transaction, the last one
    sealed with ``key`` (unsealed without: such a chain does not verify); the records made."""
    if not entries:
        return []
    head = _take_changes_chain(connection)
    with _cursor(connection) as (cursor, sql):
        return _append_after(cursor, sql, entries, head, key)


def _take_changes_chain(connection: Connection) -> ChainHead:
    """Lock the first changes chain no other transaction holds (a new one when all are held)."""
    free = select(AuditChainRow.id).where(AuditChainRow.kind == CHANGES).order_by(AuditChainRow.id).limit(1)
    if connection.dialect.name == "postgresql":
        free = free.with_for_update(skip_locked=True)
    taken = connection.execute(
        update(AuditChainRow)
        .where(AuditChainRow.id == free.scalar_subquery())
        .values(last_seq=AuditChainRow.last_seq)
        .returning(AuditChainRow.id, AuditChainRow.last_seq, AuditChainRow.last_hash)
    ).first()
    if taken is None:
        return _open_chain(connection, CHANGES)
    return ChainHead(int(taken.id), int(taken.last_seq), str(taken.last_hash))


def _open_chain(connection: Connection, kind: str) -> ChainHead:
    """A new, empty chain of ``kind``, opened in ``connection``'s transaction."""
    writer = f"{socket.gethostname()} pid {os.getpid()}"[:128]
    opened = connection.execute(
        insert(AuditChainRow)
        .values(kind=kind, writer=writer, created_at=datetime.now(UTC), last_seq=0, last_hash="")
        .returning(AuditChainRow.id)
    ).scalar_one()
    head = ChainHead(int(opened), 0, genesis_hash(int(opened)))
    connection.execute(update(AuditChainRow).where(AuditChainRow.id == head.chain).values(last_hash=head.hash))
    return head


@dataclass(frozen=True)
class ChainTail:
    """The end of chain 1 as seen under its lock."""

    last_seq: int
    last_hash: str
    keyed: bool
    """Whether any record carries a seal (the log is keyed by an audit key already)."""


class ChainWriter:
    """One writer of the audit log: its own chain (opened at its first append in a process, never
    reused), appended to by :meth:`append_current` only, one group commit at a time."""

    def __init__(self, engine: Engine, key: ChainKey | None) -> None:
        self._engine = engine
        self._key = key
        self._writer: Any = None
        """The connection :meth:`append_current` keeps (see there)."""
        self._writer_lock = threading.Lock()
        self._head: ChainHead | None = None
        """PostgreSQL: the chain's head as this writer last appended it (None: to be read)."""
        self._chain_id: int | None = None
        self._chain_pid = 0

    @property
    def chain(self) -> int | None:
        """The id of this writer's chain in this process (None before its first commit)."""
        return self._chain_id if self._chain_pid == os.getpid() else None

    def append_current(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """Append to this writer's chain, in one transaction, each entry whose expected metadata
        version is None or current.

        Returns the current metadata version and, per item, whether it was written. A request that
        relied on cached principals or keys expects the version its cache was filled under; any
        change to a principal or key anywhere increments it (see ``Store``). The version is read
        without a lock: a change committed before the read is seen, one committed after it
        comes after the request. A failure leaves the chain as it was, or committed whole.
        """
        with self._writer_lock:
            if self._chain_pid != os.getpid():
                self._open_writer_chain()
            try:
                if self._engine.dialect.name == "sqlite":
                    return self._append_current_sqlite(items)
                return self._append_current_postgresql(items)
            except BaseException:
                self._drop_writer()  # committed or not, the next append starts on a new connection
                self._head = None  # and reads the head
                raise

    def _open_writer_chain(self) -> None:
        """Open this process's writer chain (a process started by fork never shares its parent's)."""
        self._writer = None  # the parent's connection, if any, is not this process's to use or close
        with connection_errors_as_unavailable(), self._engine.begin() as connection:
            self._head = _open_chain(connection, WRITER)
        self._chain_id, self._chain_pid = self._head.chain, os.getpid()

    def _writer_connection(self) -> Any:
        """The DB-API connection of the writer, kept out of the pool, in autocommit (transactions
        are begun by hand). A checkout from the pool, its reset and SQLAlchemy's transaction cost
        more CPU per commit than the statements."""
        if self._writer is None:
            with connection_errors_as_unavailable():
                writer = self._engine.raw_connection()  # with the engine's pragmas and options
            writer.detach()  # never back to the pool
            dbapi = writer.dbapi_connection
            if self._engine.dialect.name == "sqlite":
                dbapi.isolation_level = None  # type: ignore[union-attr]
            else:
                dbapi.autocommit = True  # type: ignore[union-attr]
            self._writer = writer
        return self._writer.dbapi_connection

    def _drop_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):  # a dead connection may fail to close
                writer.close()

    def _head_and_version(self, cursor: Any, sql: _RawSql) -> tuple[ChainHead, object]:
        """The writer chain's head and the metadata version, in one read."""
        assert self._chain_id is not None
        cursor.execute(sql.head_and_version, (self._chain_id,))
        last_seq, last_hash, version = cursor.fetchone()
        return ChainHead(self._chain_id, int(last_seq), str(last_hash)), version

    def _append_current_sqlite(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """SQLite: in an explicit ``BEGIN IMMEDIATE`` transaction, which takes the database's
        write lock first (waiting up to the busy timeout), then one read of the version."""
        cursor = self._writer_connection().cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                head, version = self._head_and_version(cursor, _SQLITE)
                version, accepted, entries = _accepted(items, version)
                _append_after(cursor, _SQLITE, entries, head, self._key)
                cursor.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # none may be open any more
                    cursor.execute("ROLLBACK")
                raise
        finally:
            cursor.close()
        return version, accepted

    def _append_current_postgresql(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """PostgreSQL: one round trip when the writer knows its head and the batch expects one
        metadata version: the records chained and sealed after that head, then one statement
        that appends them and moves the head only if the head and the version are still those
        (:data:`_POSTGRESQL_APPEND`). Otherwise (the first commit, a failure, a changed version)
        the head and the version are read first, and the same statement follows."""
        single, expected = _one_expectation(items)
        tried: list[AuditRecord] = []
        if self._head is not None and single:
            tried = _sealed([entry for entry, _ in items], self._head, self._key)
            try:
                version, written = self._append_if(tried, self._head, expected)
            except Exception:
                if not self._writer_is_dead():
                    raise
                self._drop_writer()  # it may have committed before it died: the head read below says
                version, written = 0, False
            if written:
                self._head = _head_of(tried)
                return version, [True] * len(items)
        self._head = None
        head, read = self._read_head_postgresql()
        if tried and head == _head_of(tried):  # committed, and the answer was lost with the connection
            self._head = head
            return int(read if expected is None else expected), [True] * len(items)  # type: ignore[call-overload]
        version, accepted, entries = _accepted(items, read)
        if entries:
            records = _sealed(entries, head, self._key)
            if not self._append_if(records, head, None)[1]:
                raise DatabaseUnavailable("the audit chain's head moved while this writer appended to it")
            head = _head_of(records)
        self._head = head
        return version, accepted

    def _append_if(self, records: Sequence[AuditRecord], head: ChainHead, expected: int | None) -> tuple[int, bool]:
        """Append ``records`` if the chain's head is still ``head`` and the metadata version is
        ``expected`` (any, for None); the version, and whether they were appended."""
        cursor = self._writer_connection().cursor()
        try:
            cursor.execute(_POSTGRESQL_APPEND, _append_parameters(records, head, expected))
            version, appended = cursor.fetchone()
        finally:
            cursor.close()
        return int(version), int(appended) == len(records)

    def _read_head_postgresql(self) -> tuple[ChainHead, object]:
        """The writer chain's head and the metadata version; a dead connection (the server
        restarted since the last append) is replaced and the read tried once more."""
        for attempt in (1, 2):
            cursor = self._writer_connection().cursor()
            try:
                return self._head_and_version(cursor, _POSTGRESQL)
            except Exception:
                if attempt == 2 or not self._writer_is_dead():
                    raise
                self._drop_writer()
            finally:
                cursor.close()
        raise AssertionError("unreachable")

    def _writer_is_dead(self) -> bool:
        return self._writer is None or bool(self._writer.dbapi_connection.closed)

    def close(self) -> None:
        """Give back the connection :meth:`append_current` kept, if any."""
        with self._writer_lock:
            self._drop_writer()


class AuditRecords:
    """Reads and appends audit records over one engine; ``key`` seals appends and checks seals.

    Its :meth:`append_current` writes through one :class:`ChainWriter`; :meth:`writer` makes more
    (the audit writer's lanes), each with a chain of its own.
    """

    def __init__(self, engine: Engine, key: ChainKey | None = None) -> None:
        self._engine = engine
        self._key = key
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._writers: list[ChainWriter] = []
        self._writers_lock = threading.Lock()
        self._first = self.writer()

    def writer(self) -> ChainWriter:
        """A new writer of its own chain (closed with this object)."""
        made = ChainWriter(self._engine, self._key)
        with self._writers_lock:
            self._writers.append(made)
        return made

    @property
    def writer_chain(self) -> int | None:
        """The chain of :meth:`append_current`'s writer in this process (None before its first commit)."""
        return self._first.chain

    def append_current(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """:meth:`ChainWriter.append_current` of this object's first writer."""
        return self._first.append_current(items)

    def close(self) -> None:
        """Give back the connections of every writer made here."""
        with self._writers_lock:
            writers = list(self._writers)
        for writer in writers:
            writer.close()

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Records of every chain matching ``query`` with ``position > query.after`` (and ``<
        query.before``), in position order (descending with ``query.newest_first``)."""
        statement: Select[AuditRecordRow] = select(AuditRecordRow).where(AuditRecordRow.position > query.after)
        if query.before is not None:
            statement = statement.where(AuditRecordRow.position < query.before)
        if query.key_id is not None:
            statement = statement.where(AuditRecordRow.key_id == query.key_id)
        if query.principal is not None:
            statement = statement.where(AuditRecordRow.principal == query.principal)
        if query.action is not None:
            statement = statement.where(AuditRecordRow.action == query.action)
        if query.outcome is not None:
            statement = statement.where(AuditRecordRow.outcome == query.outcome.value)
        if query.since is not None:
            statement = statement.where(AuditRecordRow.time >= query.since)
        order = AuditRecordRow.position.desc() if query.newest_first else AuditRecordRow.position
        statement = statement.order_by(order).limit(query.limit)
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            return [_record(row) for row in session.scalars(statement)]

    def verify(
        self, checkpoint: Checkpoint | None = None, *, unsealed_tail: bool = False, batch: int = 1000
    ) -> Verification:
        """Walk every chain in sequence order and check every link, every seal (in the HSM), each
        chain's head and, when given, the ``checkpoint``: every chain it lists must still exist
        and reach its head there (see :class:`ChainVerifier`). ``unsealed_tail`` applies to chain 1.

        Raises ValueError when this store has no audit key: a chain is never called intact
        without its seals checked.
        """
        if self._key is None:
            raise ValueError("verifying the audit chain needs the audit key")
        listed = checkpoint.heads if checkpoint is not None else {}
        total = 0
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            heads = [ChainHead(int(c), int(s), str(h)) for c, s, h in session.execute(_HEADS)]
            for head in heads:
                verifier = ChainVerifier(
                    self._key,
                    listed.get(head.chain),
                    batch=batch,
                    unsealed_tail=unsealed_tail and head.chain == LEGACY_CHAIN,
                    chain_id=head.chain,
                )
                for record in _walk(session, head, batch):
                    if not verifier.feed(record):
                        break
                result = verifier.finish(head.seq, head.hash)
                if not result.ok:
                    return replace(result, records=total + result.records)
                total += result.records
            stray = session.scalars(select(AuditRecordRow.chain_id).distinct()).all()
        return _missing_chain(total, {h.chain for h in heads}, set(listed), set(stray)) or Verification(True, total)

    def head(self) -> Checkpoint:
        """The head of every chain holding records now: the checkpoint to keep."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            rows = session.execute(_HEADS.where(AuditChainRow.last_seq > 0))
            return Checkpoint.of(ChainHead(int(c), int(s), str(h)) for c, s, h in rows)

    def extend_locked(self, decide: Callable[[ChainTail], Sequence[AuditEntry]]) -> list[AuditRecord]:
        """In one transaction holding chain 1's lock, append (sealed) to chain 1 what ``decide``
        returns for its tail; the records made.

        Every process doing the same waits meanwhile (changes skip chain 1 while it is held):
        ``decide`` may use the HSM to do once what must be done once (create the audit key). Its
        exceptions roll back.
        """
        with connection_errors_as_unavailable(), self._engine.begin() as connection:
            head = connection.execute(
                update(AuditChainRow)
                .where(AuditChainRow.id == LEGACY_CHAIN)
                .values(last_seq=AuditChainRow.last_seq)
                .returning(AuditChainRow.last_seq, AuditChainRow.last_hash)
            ).one()
            keyed = (
                connection.execute(select(AuditRecordRow.seq).where(AuditRecordRow.seal.is_not(None)).limit(1)).first()
                is not None
            )
            entries = decide(ChainTail(int(head.last_seq), str(head.last_hash), keyed))
            if not entries:
                return []
            tail = ChainHead(LEGACY_CHAIN, int(head.last_seq), str(head.last_hash))
            with _cursor(connection) as (cursor, sql):
                return _append_after(cursor, sql, entries, tail, self._key)


_HEADS = select(AuditChainRow.id, AuditChainRow.last_seq, AuditChainRow.last_hash).order_by(AuditChainRow.id)


def _missing_chain(total: int, chains: set[int], listed: set[int], stray: set[int]) -> Verification | None:
    """A chain the checkpoint lists that is gone, or records of a chain without its head."""
    for chain_id in sorted(listed - chains):
        reason = f"chain {chain_id} of the checkpoint is missing (a chain was removed)"
        return Verification(False, total, 1, reason, chain_id)
    for chain_id in sorted(stray - chains):
        reason = f"records of chain {chain_id}, which has no head (its head was removed)"
        return Verification(False, total, 1, reason, chain_id)
    return None


def _walk(session: Session, head: ChainHead, batch: int) -> Iterator[AuditRecord]:
    after = 0
    while True:
        rows = session.scalars(
            select(AuditRecordRow)
            .where(AuditRecordRow.chain_id == head.chain, AuditRecordRow.seq > after, AuditRecordRow.seq <= head.seq)
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

    head_and_version: str
    """Reads a chain's head (``last_seq``, ``last_hash``) and the metadata version."""
    insert: str
    advance_head: str
    sqlite: bool

    @classmethod
    def of(cls, dialect: str) -> _RawSql:
        mark = "?" if dialect == "sqlite" else "%s"
        columns = (
            "chain_id, seq, time, request_id, principal, action, key_id, key_version, outcome, status, client, "
            "details, prev_hash, hash, seal, position"
        )
        position = (
            "(SELECT COALESCE(MAX(position), 0) + 1 FROM audit_records)"
            if dialect == "sqlite"
            else "nextval('audit_position')"
        )
        return cls(
            # Only parameter marks and this module's constants are formatted in, never values.
            head_and_version="SELECT last_seq, last_hash, version FROM audit_chains, metadata_version "  # noqa: S608
            f"WHERE audit_chains.id = {mark} AND metadata_version.id = 1",
            insert=f"INSERT INTO audit_records ({columns}) VALUES ({', '.join([mark] * 15)}, {position})",  # noqa: S608
            advance_head=f"UPDATE audit_chains SET last_seq = {mark}, last_hash = {mark} WHERE id = {mark}",  # noqa: S608
            sqlite=dialect == "sqlite",
        )

    @staticmethod
    def head_values(record: AuditRecord) -> tuple[int, str, int]:
        """The parameters of :attr:`advance_head` to make ``record`` its chain's head."""
        return record.seq, record.hash, record.chain

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
            record.chain,
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

_POSTGRESQL_APPEND = """
WITH current AS (SELECT version FROM metadata_version WHERE id = 1),
moved AS (
    UPDATE audit_chains SET last_seq = %(last_seq)s, last_hash = %(last_hash)s
    WHERE id = %(chain)s AND last_seq = %(prev_seq)s AND last_hash = %(prev_hash)s
      AND (%(expected)s::bigint IS NULL OR %(expected)s::bigint = (SELECT version FROM current))
    RETURNING id
),
appended AS (
    INSERT INTO audit_records (chain_id, seq, time, request_id, principal, action, key_id, key_version,
                               outcome, status, client, details, prev_hash, hash, seal, position)
    SELECT %(chain)s, r.seq, r.time, r.request_id, r.principal, r.action, r.key_id, r.key_version,
           r.outcome, r.status, r.client, r.details, r.prev_hash, r.hash, r.seal, nextval('audit_position')
    FROM jsonb_to_recordset(%(records)s::jsonb) AS r(
        seq bigint, time timestamptz, request_id text, principal text, action text, key_id text,
        key_version int, outcome text, status int, client text, details jsonb, prev_hash text, hash text,
        seal text)
    WHERE EXISTS (SELECT FROM moved)
    RETURNING 1
)
SELECT (SELECT version FROM current), (SELECT count(*) FROM appended)
"""
"""A PostgreSQL group commit in one statement (its own transaction): the records (one JSON array,
in order, so that positions follow the sequence numbers) are appended and the head moved only
if the chain's head is still the one they follow and the metadata version the one expected
(any, for NULL). Answers the version and how many records were appended (all or none)."""


def _append_parameters(records: Sequence[AuditRecord], head: ChainHead, expected: int | None) -> dict[str, object]:
    """The parameters of :data:`_POSTGRESQL_APPEND` for ``records`` (of one chain, in order) after ``head``."""
    rows = [_json_row(record) for record in records]
    return {
        "chain": head.chain,
        "prev_seq": head.seq,
        "prev_hash": head.hash,
        "last_seq": records[-1].seq,
        "last_hash": records[-1].hash,
        "expected": expected,
        "records": json.dumps(rows, separators=(",", ":")),
    }


def _json_row(record: AuditRecord) -> dict[str, object]:
    """``record``'s row for ``jsonb_to_recordset``: its hashed fields (the time with its offset, to the
    microsecond), its hash and its seal."""
    return {**canonical_fields(record.seq, record.prev_hash, record.entry), "hash": record.hash, "seal": record.seal}


def _one_expectation(items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[bool, int | None]:
    """Whether the items expect one metadata version at most, and which (None: none expects any)."""
    expected = {version for _, version in items if version is not None}
    return len(expected) <= 1, next(iter(expected), None)


def _head_of(records: Sequence[AuditRecord]) -> ChainHead:
    return ChainHead(records[-1].chain, records[-1].seq, records[-1].hash)


@contextmanager
def _cursor(connection: Connection) -> Iterator[tuple[Any, _RawSql]]:
    """The driver's cursor of ``connection`` (in its transaction) and the statements for its dialect."""
    cursor = connection.connection.cursor()
    try:
        yield cursor, _SQLITE if connection.dialect.name == "sqlite" else _POSTGRESQL
    finally:
        cursor.close()


def _accepted(
    items: Sequence[tuple[AuditEntry, int | None]], version: object
) -> tuple[int, list[bool], list[AuditEntry]]:
    """The metadata ``version``, whether each item expected it (or nothing), and the entries accepted."""
    current = int(version)  # type: ignore[call-overload]
    accepted = [expected is None or expected == current for _, expected in items]
    return current, accepted, [entry for (entry, _), ok in zip(items, accepted, strict=True) if ok]


def _sealed(entries: Sequence[AuditEntry], head: ChainHead, key: ChainKey | None) -> list[AuditRecord]:
    """``entries`` chained after ``head``, the last sealed with ``key`` (one HMAC in the HSM)."""
    records = chain(entries, head.seq, head.hash, head.chain)
    if key is not None:
        records[-1] = seal(key, records[-1])
    return records


def _append_after(
    cursor: Any, sql: _RawSql, entries: Sequence[AuditEntry], head: ChainHead, key: ChainKey | None
) -> list[AuditRecord]:
    """Append ``entries`` after ``head``, a chain head this transaction alone writes, sealing the
    last with ``key``."""
    if not entries:
        return []
    records = _sealed(entries, head, key)
    cursor.executemany(sql.insert, [sql.row(record) for record in records])
    cursor.execute(sql.advance_head, sql.head_values(records[-1]))
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
    return AuditRecord(
        seq=row.seq,
        entry=entry,
        prev_hash=row.prev_hash,
        hash=row.hash,
        seal=row.seal,
        chain=row.chain_id,
        position=row.position,
    )
