"""A chain of the audit log in the database: opening one, and appending records after its head.

What every append shares, whichever chain it writes (a writer chain of
:mod:`keymanager.db.audit_writer`, a changes chain or chain 1 of :mod:`keymanager.db.audit`): the
kinds of chains, a new chain's first head, the records chained and sealed after a head, and the
statements that insert them and move the head, in the driver's own dialect and parameter style.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import Connection, insert, update

from keymanager.db.models import AuditChainRow
from keymanager.domain.audit import AuditEntry, AuditRecord, ChainKey, chain, genesis_hash, seal
from keymanager.domain.checkpoint import ChainHead

WRITER = "writer"
"""Kind of the chain of one audit writer process."""
CHANGES = "changes"
"""Kind of the chains of the records written in the transactions of changes."""


def open_chain(connection: Connection, kind: str) -> ChainHead:
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
class RawSql:
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
    def of(cls, dialect: str) -> RawSql:
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


SQLITE = RawSql.of("sqlite")
POSTGRESQL = RawSql.of("postgresql")


def head_of(records: Sequence[AuditRecord]) -> ChainHead:
    """The head of a chain whose last records are ``records``."""
    return ChainHead(records[-1].chain, records[-1].seq, records[-1].hash)


@contextmanager
def cursor_of(connection: Connection) -> Iterator[tuple[Any, RawSql]]:
    """The driver's cursor of ``connection`` (in its transaction) and the statements for its dialect."""
    cursor = connection.connection.cursor()
    try:
        yield cursor, SQLITE if connection.dialect.name == "sqlite" else POSTGRESQL
    finally:
        cursor.close()


def sealed(entries: Sequence[AuditEntry], head: ChainHead, key: ChainKey | None) -> list[AuditRecord]:
    """``entries`` chained after ``head``, the last sealed with ``key`` (one HMAC in the HSM)."""
    records = chain(entries, head.seq, head.hash, head.chain)
    if key is not None:
        records[-1] = seal(key, records[-1])
    return records


def append_after(
    cursor: Any, sql: RawSql, entries: Sequence[AuditEntry], head: ChainHead, key: ChainKey | None
) -> list[AuditRecord]:
    """Append ``entries`` after ``head``, a chain head this transaction alone writes, sealing the
    last with ``key``."""
    if not entries:
        return []
    records = sealed(entries, head, key)
    write(cursor, sql, records)
    return records


def write(cursor: Any, sql: RawSql, records: Sequence[AuditRecord]) -> None:
    """Insert ``records`` (chained and sealed after their chain's head, which this transaction alone
    writes) and move the head to the last of them."""
    cursor.executemany(sql.insert, [sql.row(record) for record in records])
    cursor.execute(sql.advance_head, sql.head_values(records[-1]))
