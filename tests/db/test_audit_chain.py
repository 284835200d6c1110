"""The audit chain keyed by the HSM: what someone who can write the database but not use the HSM
cannot hide (SQLite and PostgreSQL, real SoftHSM)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import Engine, text

from keymanager.db.audit import AuditRecords
from keymanager.domain.audit import AuditQuery, AuditRecord, genesis_hash, record_hash
from keymanager.domain.checkpoint import ChainHead, Checkpoint
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from tests.db.test_audit import entry


@pytest.fixture
def audit(engine: Engine, hsm: Hsm) -> AuditRecords:
    """A chain of 9 records in 3 appends: sealed at records 3, 6 and 9."""
    store = AuditRecords(engine, AuditKey(hsm))
    for start in (1, 4, 7):
        store.append_current([(entry(n), None) for n in range(start, start + 3)])
    return store


def records(audit: AuditRecords, chain: int | None = None) -> list[AuditRecord]:
    """The records of ``chain`` (by default the chain of the newest record) in sequence order."""
    listed = audit.query(AuditQuery(limit=1000))
    chain = listed[-1].chain if chain is None else chain
    return sorted((r for r in listed if r.chain == chain), key=lambda r: r.seq)


def rewrite_from(engine: Engine, audit: AuditRecords, seq: int, *, principal: str) -> None:
    """What an attacker with the database alone can do: edit record ``seq`` of the newest record's
    chain, then recompute the SHA-256 chain after it and move the head, keeping every seal column as it was."""
    chain = records(audit)
    chain_id = chain[0].chain
    prev = chain[seq - 2].hash if seq > 1 else genesis_hash(chain_id)
    with engine.begin() as connection:
        for record in chain[seq - 1 :]:
            changed = replace(record.entry, principal=principal) if record.seq == seq else record.entry
            digest = record_hash(record.seq, prev, changed)
            connection.execute(
                text(
                    "UPDATE audit_records SET principal = :p, prev_hash = :prev, hash = :h "
                    "WHERE chain_id = :chain AND seq = :seq"
                ),
                {"p": changed.principal, "prev": prev, "h": digest, "seq": record.seq, "chain": chain_id},
            )
            prev = digest
        connection.execute(
            text("UPDATE audit_chains SET last_hash = :h WHERE id = :chain"), {"h": prev, "chain": chain_id}
        )


def truncate_to(engine: Engine, audit: AuditRecords, seq: int) -> None:
    """Delete the records of the newest record's chain after ``seq`` and move its head back to it."""
    kept = records(audit)[seq - 1]
    with engine.begin() as connection:
        connection.execute(
            text("DELETE FROM audit_records WHERE chain_id = :chain AND seq > :seq"), {"seq": seq, "chain": kept.chain}
        )
        connection.execute(
            text("UPDATE audit_chains SET last_seq = :seq, last_hash = :h WHERE id = :chain"),
            {"seq": seq, "h": kept.hash, "chain": kept.chain},
        )


def test_every_append_seals_its_last_record(audit: AuditRecords) -> None:
    assert [r.seq for r in records(audit) if r.seal is not None] == [3, 6, 9]
    assert audit.verify().ok


def test_an_edited_record_with_the_later_hashes_recomputed_is_detected(audit: AuditRecords, engine: Engine) -> None:
    rewrite_from(engine, audit, 5, principal="mallory")
    result = audit.verify()
    assert not result.ok
    assert result.first_broken_seq == 4  # the first record after the last good seal (record 3)
    assert "seal of record 6" in (result.reason or "")


def test_a_forged_chain_without_seals_is_detected(audit: AuditRecords, engine: Engine) -> None:
    rewrite_from(engine, audit, 8, principal="mallory")
    with engine.begin() as connection:  # hide the seal that no longer matches
        connection.execute(text("UPDATE audit_records SET seal = NULL WHERE seq = 9"))
    result = audit.verify()
    assert (result.ok, result.first_broken_seq) == (False, 7)
    assert "no seal" in (result.reason or "")


def test_a_seal_moved_to_another_record_is_detected(audit: AuditRecords, engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE audit_records SET seal = (SELECT seal FROM audit_records WHERE seq = 3) WHERE seq = 6")
        )
    result = audit.verify()
    assert (result.ok, result.first_broken_seq) == (False, 4)


def test_records_appended_without_the_audit_key_are_detected(audit: AuditRecords, engine: Engine) -> None:
    unkeyed = AuditRecords(engine)  # no key: what a writer without the HSM produces
    unkeyed.append_current([(entry(10), None)])
    result = audit.verify()
    assert (result.ok, result.chain, result.first_broken_seq, result.records) == (False, unkeyed.writer_chain, 1, 9)


def test_reordered_records_are_detected(audit: AuditRecords, engine: Engine) -> None:
    with engine.begin() as connection:  # swap the seq numbers of records 4 and 5
        connection.execute(text("UPDATE audit_records SET seq = 1000 WHERE seq = 4"))
        connection.execute(text("UPDATE audit_records SET seq = 4 WHERE seq = 5"))
        connection.execute(text("UPDATE audit_records SET seq = 5 WHERE seq = 1000"))
    result = audit.verify()
    assert (result.ok, result.first_broken_seq) == (False, 4)


def test_a_truncated_tail_is_detected_against_a_checkpoint(audit: AuditRecords, engine: Engine) -> None:
    checkpoint = audit.head()
    last = records(audit)[-1]
    assert checkpoint == Checkpoint.of([ChainHead(last.chain, 9, last.hash)])
    assert audit.verify(checkpoint).ok
    truncate_to(engine, audit, 6)  # back to an earlier seal: the chain alone still looks whole
    assert audit.verify().ok
    result = audit.verify(checkpoint)
    assert (result.ok, result.first_broken_seq) == (False, 7)
    assert "records were removed" in (result.reason or "")


def test_a_tail_replaced_past_the_checkpoint_is_detected(audit: AuditRecords, engine: Engine, hsm: Hsm) -> None:
    sixth = records(audit)[5]
    checkpoint = Checkpoint.of([ChainHead(sixth.chain, 6, sixth.hash)])
    truncate_to(engine, audit, 3)
    audit.append_current([(entry(n), None) for n in range(20, 26)])  # other records 4..9, sealed by the service
    assert audit.verify().ok
    result = audit.verify(checkpoint)
    assert (result.ok, result.first_broken_seq) == (False, 6)
    assert "differs from the checkpoint" in (result.reason or "")


def test_verification_needs_the_audit_key(engine: Engine) -> None:
    with pytest.raises(ValueError, match="audit key"):
        AuditRecords(engine).verify()
