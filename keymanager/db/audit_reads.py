"""Reading the audit log: listing records, verifying every row of every chain, the heads.

Verification walks **every row** of a chain, not the range its head names: rows are read in
sequence order, a batch at a time (memory stays bounded, the cost linear in the rows), and a row
numbered below 1, a gap, a row past the head (which the chain's head says the chain does not
hold, such as rows in a chain whose head says it is empty) or rows of a chain without a head
break the log. A row past the head that a writer committed during the walk is no break: its
commit moved the head with it, so the head read again covers it, and the walk stops at the head
it started from (newer records are the next verification's).

A listing shows only the rows of each chain's verified range, numbered 1 to its head: rows
outside it are never shown as records of the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from keymanager.db.models import AuditChainRow, AuditRecordRow
from keymanager.domain.audit import AuditEntry, AuditQuery, AuditRecord, ChainKey, Outcome, Verification
from keymanager.domain.audit_verification import ChainVerifier
from keymanager.domain.checkpoint import LEGACY_CHAIN, ChainHead, Checkpoint

HEADS = select(AuditChainRow.id, AuditChainRow.last_seq, AuditChainRow.last_hash).order_by(AuditChainRow.id)
"""Every chain's head, by chain id."""


def query_records(session: Session, query: AuditQuery) -> list[AuditRecord]:
    """Records of every chain matching ``query`` with ``position > query.after`` (and ``<
    query.before``), in position order (descending with ``query.newest_first``); only rows
    numbered from 1 to their chain's head."""
    statement: Select[AuditRecordRow] = (
        select(AuditRecordRow)
        .join(AuditChainRow, AuditChainRow.id == AuditRecordRow.chain_id)
        .where(AuditRecordRow.position > query.after, AuditRecordRow.seq >= 1)
        .where(AuditRecordRow.seq <= AuditChainRow.last_seq)
    )
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
    return [record_of(row) for row in session.scalars(statement)]


def verify_chains(
    session: Session, key: ChainKey, checkpoint: Checkpoint | None, *, unsealed_tail: bool, batch: int
) -> Verification:
    """Every row of every chain checked in sequence order (links, hashes, seals in the HSM with
    ``key``), each chain's end against its head and, when given, the ``checkpoint`` (every chain
    it lists must exist and reach its head there). ``unsealed_tail`` applies to chain 1."""
    listed = checkpoint.heads if checkpoint is not None else {}
    heads = chain_heads(session)
    total = 0
    for head in heads:
        verifier = ChainVerifier(
            key,
            listed.get(head.chain),
            batch=batch,
            unsealed_tail=unsealed_tail and head.chain == LEGACY_CHAIN,
            chain_id=head.chain,
        )
        _feed_chain(session, verifier, head, batch)
        result = verifier.finish(head.seq, head.hash)
        if not result.ok:
            return replace(result, records=total + result.records)
        total += result.records
    stray = session.scalars(select(AuditRecordRow.chain_id).distinct()).all()
    return _missing_chain(total, {h.chain for h in heads}, set(listed), set(stray)) or Verification(True, total)


def chain_heads(session: Session, *, holding_records: bool = False) -> list[ChainHead]:
    """The head of every chain (with ``holding_records``, of those whose head names a record), by id."""
    statement = HEADS.where(AuditChainRow.last_seq > 0) if holding_records else HEADS
    return [ChainHead(int(c), int(s), str(h)) for c, s, h in session.execute(statement)]


def _feed_chain(session: Session, verifier: ChainVerifier, head: ChainHead, batch: int) -> None:
    """Feed ``verifier`` every row of ``head``'s chain up to ``head``; a row past it breaks the
    chain unless the head, read again, covers it (a commit made during the walk)."""
    for record in _rows(session, head.chain, batch):
        if record.seq > head.seq:
            now = session.execute(select(AuditChainRow.last_seq).where(AuditChainRow.id == head.chain)).scalar()
            if now is None or now < record.seq:
                verifier.refuse(record.seq, _past_head(record.seq, head.seq))
            return
        if not verifier.feed(record):
            return


def _past_head(seq: int, head: int) -> str:
    where = "says the chain is empty" if head == 0 else f"is record {head}"
    return f"record {seq} lies past the chain's head, which {where}: it is not part of the chain"


def _rows(session: Session, chain: int, batch: int) -> Iterator[AuditRecord]:
    """Every row of ``chain`` in sequence order, whatever its number, read ``batch`` at a time."""
    statement = select(AuditRecordRow).where(AuditRecordRow.chain_id == chain).order_by(AuditRecordRow.seq)
    page = statement
    while True:
        rows = session.scalars(page.limit(batch)).all()
        for row in rows:
            yield record_of(row)
        if len(rows) < batch:
            return
        page = statement.where(AuditRecordRow.seq > rows[-1].seq)


def _missing_chain(total: int, chains: set[int], listed: set[int], stray: set[int]) -> Verification | None:
    """A chain the checkpoint lists that is gone, or records of a chain without its head."""
    for chain_id in sorted(listed - chains):
        reason = f"chain {chain_id} of the checkpoint is missing (a chain was removed)"
        return Verification(False, total, 1, reason, chain_id)
    for chain_id in sorted(stray - chains):
        reason = f"records of chain {chain_id}, which has no head (its head was removed)"
        return Verification(False, total, 1, reason, chain_id)
    return None


def record_of(row: AuditRecordRow) -> AuditRecord:
    """The record a row holds."""
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
