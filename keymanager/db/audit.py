"""The audit log in the database: its chains and appending to them (a chain's statements:
:mod:`keymanager.db.audit_chains`; a writer's chain: :mod:`keymanager.db.audit_writer`; reading
and verifying: :mod:`keymanager.db.audit_reads`).

There is no head every writer locks. The log is made of chains (``audit_chains``, one row per
chain holding its head), each appended to by one writer at a time:

- a **writer chain** per audit writer process (:meth:`AuditRecords.append_current`, the group
  commit, through a :class:`~keymanager.db.audit_writer.ChainWriter`): opened the first time the
  process commits, written by that process only, never reused (a restarted process opens a new
  one). An append reads the chain's head and the metadata version in one statement, then writes:
  on PostgreSQL, one statement inserts every record of the group commit (arrays unnested) and
  moves the head, so a commit is two round trips however many records it holds;
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

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select, update
from sqlalchemy.orm import sessionmaker

from keymanager.db.audit_chains import CHANGES, append_after, cursor_of, open_chain
from keymanager.db.audit_reads import chain_heads, query_records, verify_chains
from keymanager.db.audit_writer import ChainWriter
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AuditChainRow, AuditRecordRow
from keymanager.domain.audit import AuditEntry, AuditQuery, AuditRecord, ChainKey, Verification
from keymanager.domain.checkpoint import LEGACY_CHAIN, ChainHead, Checkpoint


def append(connection: Connection, entries: Sequence[AuditEntry], key: ChainKey | None = None) -> list[AuditRecord]:
    """Append ``entries`` to a changes chain inside ``connection``'s transaction, the last one
    sealed with ``key`` (unsealed without: such a chain does not verify); the records made."""
    if not entries:
        return []
    head = _take_changes_chain(connection)
    with cursor_of(connection) as (cursor, sql):
        return append_after(cursor, sql, entries, head, key)


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
        return open_chain(connection, CHANGES)
    return ChainHead(int(taken.id), int(taken.last_seq), str(taken.last_hash))


@dataclass(frozen=True)
class ChainTail:
    """The end of chain 1 as seen under its lock."""

    last_seq: int
    last_hash: str
    keyed: bool
    """Whether any record carries a seal (the log is keyed by an audit key already)."""


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
        """Records of every chain matching ``query``, in position order, each chain's verified range
        only (:func:`keymanager.db.audit_reads.query_records`)."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            return query_records(session, query)

    def verify(
        self, checkpoint: Checkpoint | None = None, *, unsealed_tail: bool = False, batch: int = 1000
    ) -> Verification:
        """Walk every row of every chain in sequence order and check every link, every seal (in the
        HSM), each chain's head and, when given, the ``checkpoint``: every chain it lists must still
        exist and reach its head there (:func:`keymanager.db.audit_reads.verify_chains`).
        ``unsealed_tail`` applies to chain 1.

        Raises ValueError when this store has no audit key: a chain is never called intact
        without its seals checked.
        """
        if self._key is None:
            raise ValueError("verifying the audit chain needs the audit key")
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            return verify_chains(session, self._key, checkpoint, unsealed_tail=unsealed_tail, batch=batch)

    def head(self) -> Checkpoint:
        """The head of every chain holding records now: the checkpoint to keep."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            return Checkpoint.of(chain_heads(session, holding_records=True))

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
            with cursor_of(connection) as (cursor, sql):
                return append_after(cursor, sql, entries, tail, self._key)
