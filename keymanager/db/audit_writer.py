"""The writer chains of the audit log: one per audit writer process, appended to by group commits.

A :class:`ChainWriter` opens its chain at its first append in a process (never reused: a
restarted or forked process opens a new one) and appends each group commit in one transaction
on a connection of its own, only the entries whose expected metadata version is current. On
PostgreSQL one statement appends every record of a commit and moves the head
(:data:`_POSTGRESQL_APPEND`); on SQLite, ``BEGIN IMMEDIATE`` takes the write lock first.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine

from keymanager.db.audit_chains import (
    POSTGRESQL,
    SQLITE,
    WRITER,
    RawSql,
    append_after,
    head_of,
    open_chain,
    sealed,
    write,
)
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.domain.audit import AuditEntry, AuditRecord, ChainKey
from keymanager.domain.checkpoint import ChainHead
from keymanager.errors import DatabaseUnavailable


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
        """The chain's head as this writer last appended it (None: to be read)."""
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
            self._head = open_chain(connection, WRITER)
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

    def _head_and_version(self, cursor: Any, sql: RawSql) -> tuple[ChainHead, object]:
        """The writer chain's head and the metadata version, in one read."""
        assert self._chain_id is not None
        cursor.execute(sql.head_and_version, (self._chain_id,))
        last_seq, last_hash, version = cursor.fetchone()
        return ChainHead(self._chain_id, int(last_seq), str(last_hash)), version

    def _append_current_sqlite(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        """SQLite: in an explicit ``BEGIN IMMEDIATE`` transaction, which takes the database's
        write lock first (waiting up to the busy timeout), then one read of the head and the version.

        The records are chained and sealed (the HSM's HMAC, on the HSM thread) *before* the lock is
        taken, after the head this writer last appended, so the database's one write lock, which
        every process's writer waits for, is never held across a hand-off to another thread; when
        the head read under the lock is another or an entry's version is not current, they are
        chained and sealed again under it."""
        single, _ = _one_expectation(items)
        known = self._head
        tried = sealed([entry for entry, _ in items], known, self._key) if known is not None and single else None
        cursor = self._writer_connection().cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                head, version = self._head_and_version(cursor, SQLITE)
                version, accepted, entries = _accepted(items, version)
                if tried is not None and head == known and all(accepted):
                    write(cursor, SQLITE, tried)
                    records = tried
                else:
                    records = append_after(cursor, SQLITE, entries, head, self._key)
                cursor.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # none may be open any more
                    cursor.execute("ROLLBACK")
                raise
        finally:
            cursor.close()
        self._head = head_of(records) if records else head
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
            tried = sealed([entry for entry, _ in items], self._head, self._key)
            try:
                version, written = self._append_if(tried, self._head, expected)
            except Exception:
                if not self._writer_is_dead():
                    raise
                self._drop_writer()  # it may have committed before it died: the head read below says
                version, written = 0, False
            if written:
                self._head = head_of(tried)
                return version, [True] * len(items)
        self._head = None
        head, read = self._read_head_postgresql()
        if tried and head == head_of(tried):  # committed, and the answer was lost with the connection
            self._head = head
            return int(read if expected is None else expected), [True] * len(items)  # type: ignore[call-overload]
        version, accepted, entries = _accepted(items, read)
        if entries:
            records = sealed(entries, head, self._key)
            if not self._append_if(records, head, None)[1]:
                raise DatabaseUnavailable("the audit chain's head moved while this writer appended to it")
            head = head_of(records)
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
                return self._head_and_version(cursor, POSTGRESQL)
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
    return {
        "chain": head.chain,
        "prev_seq": head.seq,
        "prev_hash": head.hash,
        "last_seq": records[-1].seq,
        "last_hash": records[-1].hash,
        "expected": expected,
        "records": "[" + ",".join(map(_json_row, records)) + "]",
    }


def _json_row(record: AuditRecord) -> str:
    """``record``'s row for ``jsonb_to_recordset``, as JSON: its hashed fields (the time with its
    offset, to the microsecond) as :func:`~keymanager.domain.audit.chain` encoded them for its hash,
    not encoded again, then its hash and its seal (hex digits, or null)."""
    if not record.canonical.endswith("}"):
        raise ValueError("an audit record is appended as chain() made it, with its canonical JSON")
    seal = "null" if record.seal is None else f'"{record.seal}"'
    return f'{record.canonical[:-1]},"hash":"{record.hash}","seal":{seal}}}'


def _one_expectation(items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[bool, int | None]:
    """Whether the items expect one metadata version at most, and which (None: none expects any)."""
    expected = {version for _, version in items if version is not None}
    return len(expected) <= 1, next(iter(expected), None)


def _accepted(
    items: Sequence[tuple[AuditEntry, int | None]], version: object
) -> tuple[int, list[bool], list[AuditEntry]]:
    """The metadata ``version``, whether each item expected it (or nothing), and the entries accepted."""
    current = int(version)  # type: ignore[call-overload]
    accepted = [expected is None or expected == current for _, expected in items]
    return current, accepted, [entry for (entry, _), ok in zip(items, accepted, strict=True) if ok]
