"""The audit chain keyed by the HSM: what someone who can write the database but not use the HSM
cannot hide (SQLite and PostgreSQL, real SoftHSM)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import Engine, text

from keymanager.db.audit import AuditRecords
from keymanager.domain.audit import AuditQuery, AuditRecord, record_hash
from keymanager.domain.checkpoint import Checkpoint
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


def records(audit: AuditRecords) -> list[AuditRecord]:
    return audit.query(AuditQuery(limit=1000))


def rewrite_from(engine: Engine, audit: AuditRecords, seq: int, *, principal: str) -> None:
    """What an attacker with the database alone can do: edit record ``seq``, then recompute the
    SHA-256 chain after it and move the head, keeping every seal column as it was."""
    chain = records(audit)
    prev = chain[seq - 2].hash if seq > 1 else "0" * 64
    with engine.begin() as connection:
        for record in chain[seq - 1 :]:
            changed = replace(record.entry, principal=principal) if record.seq == seq else record.entry
            digest = record_hash(record.seq, prev, changed)
            connection.execute(
                text("UPDATE audit_records SET principal = :p, prev_hash = :prev, hash = :h WHERE seq = :seq"),
                {"p": changed.principal, "prev": prev, "h": digest, "seq": record.seq},
            )
            prev = digest
        connection.execute(text("UPDATE audit_head SET last_hash = :h WHERE id = 1"), {"h": prev})


def truncate_to(engine: Engine, audit: AuditRecords, seq: int) -> None:
    """Delete the records after ``seq`` and move the chain head back to it."""
    kept = records(audit)[seq - 1]
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_records WHERE seq > :seq"), {"seq": seq})
        connection.execute(
            text("UPDATE audit_head SET last_seq = :seq, last_hash = :h WHERE id = 1"), {"seq": seq, "h": kept.hash}
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
    AuditRecords(engine).append_current([(entry(10), None)])  # no key: what a writer without the HSM produces
    result = audit.verify()
    assert (result.ok, result.first_broken_seq, result.records) == (False, 10, 9)


def test_reordered_records_are_detected(audit: AuditRecords, engine: Engine) -> None:
    with engine.begin() as connection:  # swap the seq numbers of records 4 and 5
        connection.execute(text("UPDATE audit_records SET seq = 1000 WHERE seq = 4"))
        connection.execute(text("UPDATE audit_records SET seq = 4 WHERE seq = 5"))
        connection.execute(text("UPDATE audit_records SET seq = 5 WHERE seq = 1000"))
    result = audit.verify()
    assert (result.ok, result.first_broken_seq) == (False, 4)


def test_a_truncated_tail_is_detected_against_a_checkpoint(audit: AuditRecords, engine: Engine) -> None:
    checkpoint = audit.head()
    assert checkpoint == Checkpoint(9, records(audit)[-1].hash)
    assert audit.verify(checkpoint).ok
    truncate_to(engine, audit, 6)  # back to an earlier seal: the chain alone still looks whole
    assert audit.verify().ok
    result = audit.verify(checkpoint)
    assert (result.ok, result.first_broken_seq) == (False, 7)
    assert "records were removed" in (result.reason or "")


def test_a_tail_replaced_past_the_checkpoint_is_detected(audit: AuditRecords, engine: Engine, hsm: Hsm) -> None:
    checkpoint = Checkpoint(6, records(audit)[5].hash)
    truncate_to(engine, audit, 3)
    AuditRecords(engine, AuditKey(hsm)).append_current([(entry(n), None) for n in range(20, 26)])  # other records 4..9
    assert audit.verify().ok  # sealed by the service itself, e.g. after a restore of an old backup
    result = audit.verify(checkpoint)
    assert (result.ok, result.first_broken_seq) == (False, 6)
    assert "differs from the checkpoint" in (result.reason or "")


def test_verification_needs_the_audit_key(engine: Engine) -> None:
    with pytest.raises(ValueError, match="audit key"):
        AuditRecords(engine).verify()
