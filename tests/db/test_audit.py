"""The audit chain in the database: appends, seals, tamper detection, concurrent writers (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from keymanager.db import make_engine, migrate
from keymanager.db.audit import AuditRecords
from keymanager.db.audit_writer import _append_parameters
from keymanager.db.models import AuditRecordRow
from keymanager.domain.audit import AuditEntry, AuditQuery, Outcome, canonical_fields, chain
from keymanager.domain.checkpoint import ChainHead
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.services.audit import AuditWriter
from tests.conftest import SOFTHSM_CONF, TEST_PIN, TEST_TOKEN_LABEL
from tests.support.audit_child import append_records


def entry(n: int, action: str = "key.encrypt", principal: str = "billing") -> AuditEntry:
    return AuditEntry(
        time=datetime.now(UTC),
        action=action,
        outcome=Outcome.OK,
        status=200,
        request_id=f"req-{n}",
        principal=principal,
        key_id="ab" * 16,
        key_version=1,
        client="127.0.0.1",
        details={"n": n},
    )


@pytest.fixture
def audit_key(hsm: Hsm) -> AuditKey:
    return AuditKey(hsm)


@pytest.fixture
def audit(engine: Engine, audit_key: AuditKey) -> AuditRecords:
    store = AuditRecords(engine, audit_key)
    store.append_current([(entry(n), None) for n in range(1, 6)])
    return store


def test_appended_records_form_a_valid_chain(audit: AuditRecords) -> None:
    records = audit.query(AuditQuery())
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(records))
    result = audit.verify()
    assert (result.ok, result.records, result.first_broken_seq) == (True, 5, None)
    assert [r.seal is not None for r in records] == [False, False, False, False, True]


def test_query_filters_and_pages(audit: AuditRecords) -> None:
    audit.append_current([(entry(6, action="key.create", principal="admin"), None)])
    assert [r.seq for r in audit.query(AuditQuery(principal="admin"))] == [6]
    assert [r.seq for r in audit.query(AuditQuery(action="key.encrypt", after=2, limit=2))] == [3, 4]


def test_query_newest_first_pages_down_with_before(audit: AuditRecords) -> None:
    newest = audit.query(AuditQuery(newest_first=True, limit=2))
    assert [r.seq for r in newest] == [5, 4]
    assert [r.seq for r in audit.query(AuditQuery(newest_first=True, before=4, limit=2))] == [3, 2]
    assert [r.seq for r in audit.query(AuditQuery(newest_first=True, before=4, after=2))] == [3]
    assert [r.seq for r in audit.query(AuditQuery(before=3))] == [1, 2]


def test_an_edited_record_is_detected(audit: AuditRecords, engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("UPDATE audit_records SET principal = 'mallory' WHERE seq = 3"))
    result = audit.verify()
    assert (result.ok, result.first_broken_seq, result.records) == (False, 3, 2)
    assert "edited" in (result.reason or "")


def test_a_deleted_record_is_detected(audit: AuditRecords, engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_records WHERE seq = 2"))
    result = audit.verify()
    assert (result.ok, result.first_broken_seq) == (False, 2)


def test_a_deleted_last_record_is_detected(audit: AuditRecords, engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_records WHERE seq = 5"))
    result = audit.verify()
    assert (result.ok, result.first_broken_seq) == (False, 5)


def test_swapped_records_are_detected(audit: AuditRecords, engine: Engine) -> None:
    columns = "time, request_id, principal, action, details, prev_hash, hash"
    with engine.begin() as connection:
        connection.execute(text(f"CREATE TEMPORARY TABLE swap AS SELECT seq, {columns} FROM audit_records"))
        for name in columns.split(", "):
            connection.execute(
                text(
                    f"UPDATE audit_records SET {name} = (SELECT {name} FROM swap WHERE swap.seq = "
                    "CASE audit_records.seq WHEN 2 THEN 3 ELSE 2 END) WHERE seq IN (2, 3)"
                )
            )
        connection.execute(text("DROP TABLE swap"))
    result = audit.verify()
    assert (result.ok, result.first_broken_seq) == (False, 2)


def test_two_processes_appending_at_once_each_keep_a_valid_chain_of_their_own(
    audit: AuditRecords, engine: Engine
) -> None:
    url = engine.url.render_as_string(hide_password=False)
    context = multiprocessing.get_context("spawn")
    args = (url, str(SOFTHSM_CONF), TEST_TOKEN_LABEL, TEST_PIN)
    workers = [context.Process(target=append_records, args=(*args, w, 300)) for w in (1, 2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
        assert process.exitcode == 0
    result = audit.verify()
    assert (result.ok, result.records) == (True, 5 + 600)
    listed = audit.query(AuditQuery(limit=1000))
    assert [r.position for r in listed] == sorted({r.position for r in listed})  # merged, each once
    by_chain: dict[int, list[int]] = {}
    for record in listed:
        by_chain.setdefault(record.chain, []).append(record.seq)
    assert sorted(map(len, by_chain.values())) == [5, 300, 300]  # a chain per writer process
    assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in by_chain.values())  # in sequence order


def test_group_commit_batches_waiting_records(engine: Engine, audit_key: AuditKey) -> None:
    log = AuditWriter(AuditRecords(engine, audit_key))

    async def write_all() -> None:
        await asyncio.wait_for(asyncio.gather(*(log.awrite(entry(n)) for n in range(500))), timeout=60)

    asyncio.run(write_all())
    log.close()
    assert log.batches < 500
    result = AuditRecords(engine, audit_key).verify()
    assert (result.ok, result.records) == (True, 500)
    sealed = [r.seq for r in AuditRecords(engine).query(AuditQuery(limit=1000)) if r.seal is not None]
    assert len(sealed) == log.batches  # one seal per group commit, on its last record
    assert sealed[-1] == 500


def test_an_append_writes_its_values_as_sqlalchemy_does(engine: Engine) -> None:
    """The append writes its rows without SQLAlchemy; what it stores must be what the ORM stores
    (on SQLite, times and details are text: listings filter and order by that text)."""
    moment = datetime(2026, 5, 17, 8, 9, 10, 11, tzinfo=timezone(timedelta(hours=2)))
    details = {"b": 1, "a": 'quote " and é'}
    written = AuditEntry(time=moment, action="key.read", outcome=Outcome.OK, status=200, details=details)
    AuditRecords(engine).append_current([(written, None)])
    with Session(engine) as session, session.begin():
        session.add(
            AuditRecordRow(
                chain_id=999, seq=1, position=1000, time=moment, request_id="", action="key.read", outcome="ok",
                status=200, details=details, prev_hash="", hash="",
            )
        )  # fmt: skip
    with engine.connect() as connection:
        raw = connection.execute(text("SELECT time, details FROM audit_records ORDER BY position")).all()
    assert raw[0] == raw[1]


def test_a_failed_append_writes_nothing_and_the_next_one_succeeds(audit: AuditRecords, engine: Engine) -> None:
    unwritable = entry(100)
    object.__setattr__(unwritable, "details", {"n": object()})  # fails when the row is built, after the lock
    with pytest.raises(TypeError):
        audit.append_current([(entry(99), None), (unwritable, None)])
    _, accepted = audit.append_current([(entry(6), None)])
    assert accepted == [True]
    audit.close()
    result = audit.verify()
    assert (result.ok, result.records) == (True, 6)
    with engine.begin() as connection:  # the pool's connections still run in transactions
        connection.execute(text("UPDATE audit_chains SET last_seq = last_seq + 1000"))
        connection.rollback()
    assert audit.verify().ok


class _LockProbe:
    """A chain key that, as it seals, asks another connection for SQLite's write lock (at once or never):
    what a second process's writer would wait for while the seal is made."""

    def __init__(self, key: AuditKey, path: str) -> None:
        self._key, self._path, self.lock_was_free = key, path, []

    def sign(self, messages: list[bytes]) -> list[bytes]:
        probe = sqlite3.connect(self._path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            self.lock_was_free.append(True)
        except sqlite3.OperationalError:  # database is locked
            self.lock_was_free.append(False)
        finally:
            probe.close()
        return self._key.sign(messages)


def test_sqlite_seals_a_group_without_holding_the_write_lock(tmp_path: Path, audit_key: AuditKey) -> None:
    """Every process's writer waits for SQLite's one write lock: a group's seal (a hand-off to the HSM
    thread) is made before the lock is taken, after the head the writer opened or last appended (the
    code before answered [False] * 4); the chain stays valid."""
    path = tmp_path / "var" / "keymanager.db"
    engine = make_engine(f"sqlite:///{path}")
    migrate(engine)
    try:
        probe = _LockProbe(audit_key, str(path))
        records = AuditRecords(engine, probe)
        for n in range(4):
            records.append_current([(entry(2 * n), None), (entry(2 * n + 1), None)])
        assert probe.lock_was_free == [True] * 4
        assert AuditRecords(engine, audit_key).verify().ok
    finally:
        engine.dispose()


def test_a_postgresql_group_is_the_json_of_the_hashed_fields_encoded_once() -> None:
    """The rows ``jsonb_to_recordset`` reads are each record's canonical JSON (what its hash covers),
    its hash and its seal: the same values as encoding the fields again, and a record that did not
    come from ``chain`` (no canonical JSON) is refused rather than written with fields missing."""
    unusual = AuditEntry(
        time=datetime(2026, 12, 4, 3, 50, 1, 7, tzinfo=timezone(timedelta(hours=2))),
        action="key.encrypt",
        outcome=Outcome.DENIED,
        status=403,
        principal='quote " and ü',
        details={"z": [1, {"b": None}], "a": "\u2028"},
    )
    head = ChainHead(9, 4, "e" * 64)
    records = chain([entry(1), unusual], head.seq, head.hash, head.chain)
    records[-1] = replace(records[-1], seal="ab" * 32)
    rows = json.loads(str(_append_parameters(records, head, None)["records"]))
    expected = [{**canonical_fields(r.seq, r.prev_hash, r.entry), "hash": r.hash, "seal": r.seal} for r in records]
    assert rows == expected and rows[0]["seal"] is None
    with pytest.raises(ValueError, match="canonical JSON"):
        _append_parameters([replace(records[0], canonical="")], head, None)
