"""Rows forged into the audit tables outside any chain's verified range (SQLite and PostgreSQL, real
SoftHSM): verification walks every row of every chain, so each is a break, with and without a
checkpoint, and the listing never shows them (issue 41, item 2: the probe's four forgeries)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from keymanager.db import audit_reads
from keymanager.db.audit import AuditRecords
from keymanager.db.models import AuditChainRow, AuditRecordRow
from keymanager.domain.audit import AuditEntry, AuditQuery, AuditRecord, chain, genesis_hash, record_hash
from keymanager.domain.checkpoint import ChainHead
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from tests.db.test_audit import entry


@pytest.fixture
def audit(engine: Engine, hsm: Hsm) -> AuditRecords:
    """Two sealed appends of 3 records to one writer chain."""
    store = AuditRecords(engine, AuditKey(hsm))
    for start in (1, 4):
        store.append_current([(entry(n), None) for n in range(start, start + 3)])
    return store


def forged(n: int) -> AuditEntry:
    return replace(entry(n, principal="mallory"), request_id=f"forged-{n}")


def insert(engine: Engine, records: Sequence[AuditRecord]) -> None:
    """Store ``records`` as rows, as someone who can write the database (but not use the HSM) can."""
    with Session(engine) as session, session.begin():
        position = session.scalar(select(func.max(AuditRecordRow.position))) or 0
        for offset, record in enumerate(records, start=1):
            e = record.entry
            session.add(
                AuditRecordRow(
                    chain_id=record.chain,
                    seq=record.seq,
                    position=position + offset,
                    time=e.time,
                    request_id=e.request_id,
                    principal=e.principal,
                    action=e.action,
                    key_id=e.key_id,
                    key_version=e.key_version,
                    outcome=e.outcome.value,
                    status=e.status,
                    client=e.client,
                    details=dict(e.details),
                    prev_hash=record.prev_hash,
                    hash=record.hash,
                    seal=record.seal,
                )
            )


def writer_head(audit: AuditRecords) -> ChainHead:
    assert audit.writer_chain is not None
    return audit.head().heads[audit.writer_chain]


def past_the_head(engine: Engine, audit: AuditRecords) -> int:
    """Unsealed records 7..9 linked after the head (record 6), which stays where it was."""
    head = writer_head(audit)
    insert(engine, chain([forged(n) for n in (7, 8, 9)], head.seq, head.hash, head.chain))
    return 7


def below_one(seq: int) -> Callable[[Engine, AuditRecords], int]:
    def forge(engine: Engine, audit: AuditRecords) -> int:
        head = writer_head(audit)
        e = forged(seq)
        digest = record_hash(seq, genesis_hash(head.chain), e)
        insert(engine, [AuditRecord(seq, e, genesis_hash(head.chain), digest, chain=head.chain)])
        return seq

    return forge


def chain_with_an_empty_head(engine: Engine, audit: AuditRecords) -> int:
    """A new chain whose head says it holds nothing, and 3 records in it (the last with a copied seal)."""
    with engine.begin() as connection:
        chain_id = connection.execute(
            AuditChainRow.__table__.insert()
            .values(kind="writer", writer="forger", created_at=datetime.now(UTC), last_seq=0, last_hash="")
            .returning(AuditChainRow.id)
        ).scalar_one()
        connection.execute(
            text("UPDATE audit_chains SET last_hash = :h WHERE id = :id"), {"h": genesis_hash(chain_id), "id": chain_id}
        )
    records = chain([forged(n) for n in (1, 2, 3)], 0, genesis_hash(chain_id), chain_id)
    records[-1] = replace(records[-1], seal=writer_seal(engine, audit))
    insert(engine, records)
    return 1


def writer_seal(engine: Engine, audit: AuditRecords) -> str:
    with engine.connect() as connection:
        return str(
            connection.execute(
                text("SELECT seal FROM audit_records WHERE chain_id = :c AND seq = 6"), {"c": audit.writer_chain}
            ).scalar_one()
        )


FORGERIES = {
    "unsealed rows past the head": (past_the_head, "lies past the chain's head, which is record 6"),
    "a row at seq 0": (below_one(0), "sequence number below 1"),
    "a row at seq -5": (below_one(-5), "sequence number below 1"),
    "a chain whose head says it is empty": (chain_with_an_empty_head, "which says the chain is empty"),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_row_breaks_verification_with_and_without_a_checkpoint(
    audit: AuditRecords, engine: Engine, forgery: str
) -> None:
    forge, reason = FORGERIES[forgery]
    checkpoint = audit.head()
    assert audit.verify().ok and audit.verify(checkpoint).ok
    broken_seq = forge(engine, audit)
    for result in (audit.verify(), audit.verify(checkpoint)):
        assert not result.ok
        assert result.first_broken_seq == broken_seq
        assert reason in (result.reason or "")


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_the_listing_never_shows_forged_rows(audit: AuditRecords, engine: Engine, forgery: str) -> None:
    FORGERIES[forgery][0](engine, audit)
    listed = audit.query(AuditQuery(limit=1000))
    assert [r.entry.request_id for r in listed] == [f"req-{n}" for n in range(1, 7)]
    newest_first = audit.query(AuditQuery(limit=1000, newest_first=True, principal="mallory"))
    assert newest_first == []


def test_the_service_start_check_refuses_rows_past_the_head(audit: AuditRecords, engine: Engine) -> None:
    """``AuditChain.prepare``'s check of chain 1 walks it the same way (``unsealed_tail`` accepts only
    records after the last seal that the head covers)."""
    chain_1 = audit.head().heads.get(1, ChainHead(1, 0, genesis_hash(1)))
    insert(engine, chain([forged(n) for n in (1, 2)], chain_1.seq, chain_1.hash, 1))
    result = audit.verify(unsealed_tail=True)
    assert (result.ok, result.chain, result.first_broken_seq) == (False, 1, chain_1.seq + 1)
    assert "past the chain's head" in (result.reason or "")


def test_records_a_writer_commits_during_the_walk_are_no_break(
    audit: AuditRecords, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit landing between the heads' read and the walk: its rows lie past the head read, and
    the head read again covers them."""
    heads_then = audit_reads.chain_heads

    def heads_then_a_commit(session: Session, *, holding_records: bool = False) -> list[ChainHead]:
        read = heads_then(session, holding_records=holding_records)
        audit.append_current([(entry(n), None) for n in (7, 8)])  # injected: another writer's commit
        return read

    monkeypatch.setattr(audit_reads, "chain_heads", heads_then_a_commit)
    result = audit.verify()
    assert (result.ok, result.records) == (True, 6)
    monkeypatch.undo()
    assert (audit.verify().ok, audit.verify().records) == (True, 8)
