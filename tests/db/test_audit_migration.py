"""An audit chain written before the chain was keyed (schema 0003) migrates: verified as the plain
SHA-256 chain it is, then continued keyed from a sealed marker record (SQLite and PostgreSQL)."""

from __future__ import annotations

import multiprocessing
import secrets
from collections.abc import Iterator

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, MetaData, Table, insert, text, update

from keymanager.db import make_engine, migrate
from keymanager.db.audit import AuditRecords, append
from keymanager.db.migrate import MIGRATIONS_DIR
from keymanager.domain.audit import GENESIS_HASH, AuditQuery, chain, seal
from keymanager.domain.checkpoint import latest_checkpoint
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey, Presence
from keymanager.services.audit_chain import MARKER_ACTION, AuditChain, AuditKeyMissing
from tests.conftest import SOFTHSM_CONF, TEST_PIN, TEST_TOKEN_LABEL
from tests.db.test_audit import entry
from tests.db.test_audit_chain import rewrite_from
from tests.support.audit_child import count_labels, prepare_chain


def upgrade(engine: Engine, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


@pytest.fixture
def legacy(blank_database_url: str) -> Iterator[Engine]:
    """A database at revision 0003 holding a plain SHA-256 chain of 5 records, then migrated."""
    engine = make_engine(blank_database_url)
    upgrade(engine, "0003")
    records = chain([entry(n) for n in range(1, 6)], 0, GENESIS_HASH)
    with engine.begin() as connection:
        table = Table("audit_records", MetaData(), autoload_with=connection)
        assert "seal" not in table.c
        rows = [{**_row(r.fields()), "time": r.entry.time} for r in records]
        connection.execute(insert(table), rows)
        head = Table("audit_head", MetaData(), autoload_with=connection)
        connection.execute(update(head).values(last_seq=5, last_hash=records[-1].hash))
    migrate(engine)
    yield engine
    engine.dispose()


def _row(fields: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in fields.items() if k not in ("seal", "chain", "position")}


def test_a_plain_chain_is_verified_then_continued_keyed(legacy: Engine, hsm: Hsm) -> None:
    key = AuditKey(hsm)
    store = AuditRecords(legacy, key)
    unkeyed = store.verify()
    assert (unkeyed.ok, unkeyed.first_broken_seq) == (False, 1)
    assert "no record carries a seal of the audit key yet" in (unkeyed.reason or "")
    AuditChain(store, key).prepare()
    marker = store.query(AuditQuery(after=5))[0]
    assert (marker.seq, marker.entry.action, marker.entry.principal) == (6, MARKER_ACTION, "system")
    assert marker.entry.details == {"unkeyed_records": 5, "verified": True}
    assert marker.seal is not None and marker.prev_hash == store.query(AuditQuery(after=4))[0].hash
    store.append_current([(entry(7), None)])
    assert (store.verify().ok, store.verify().records) == (True, 7)
    AuditChain(store, key).prepare()  # once only
    assert [r.entry.action for r in store.query(AuditQuery())].count(MARKER_ACTION) == 1


def test_a_plain_record_rewritten_after_the_migration_is_detected(legacy: Engine, hsm: Hsm) -> None:
    key = AuditKey(hsm)
    store = AuditRecords(legacy, key)
    AuditChain(store, key).prepare()
    rewrite_from(legacy, store, 2, principal="mallory")
    result = store.verify()
    assert (result.ok, result.first_broken_seq) == (False, 1)
    assert "seal of record 6" in (result.reason or "")


def test_a_plain_chain_already_broken_is_marked_so_and_stays_broken(legacy: Engine, hsm: Hsm) -> None:
    with legacy.begin() as connection:
        connection.execute(text("UPDATE audit_records SET principal = 'mallory' WHERE seq = 2"))
    key = AuditKey(hsm)
    store = AuditRecords(legacy, key)
    AuditChain(store, key).prepare()
    marker = store.query(AuditQuery(after=5))[0]
    assert marker.entry.details == {"unkeyed_records": 5, "verified": False, "first_broken_seq": 2}
    result = store.verify()
    assert (result.ok, result.first_broken_seq) == (False, 2)


def test_a_sealed_chain_does_not_start_without_its_key(legacy: Engine, hsm: Hsm) -> None:
    store = AuditRecords(legacy, AuditKey(hsm))
    AuditChain(store, AuditKey(hsm)).prepare()
    other = AuditKey(hsm, f"keymanager-audit-test-{secrets.token_hex(4)}")
    with pytest.raises(AuditKeyMissing, match="no audit key labelled"):
        AuditChain(AuditRecords(legacy, other), other).prepare()
    assert other.ensure(create=False) is Presence.MISSING  # and it made none


def test_a_chain_not_keyed_yet_gets_a_new_key(engine: Engine, hsm: Hsm) -> None:
    fresh = AuditKey(hsm, f"keymanager-audit-test-{secrets.token_hex(4)}")
    assert AuditChain(AuditRecords(engine, fresh), fresh).prepare() is Presence.CREATED
    assert AuditChain(AuditRecords(engine, fresh), fresh).prepare() is Presence.FOUND


def test_processes_preparing_at_once_make_one_audit_key(engine: Engine) -> None:
    label = f"keymanager-audit-race-{secrets.token_hex(4)}"
    url = engine.url.render_as_string(hide_password=False)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    common = (url, str(SOFTHSM_CONF), TEST_TOKEN_LABEL, TEST_PIN, label, barrier, results)
    racers = [context.Process(target=prepare_chain, args=common) for _ in range(3)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=120)
        assert racer.exitcode == 0
    assert sorted(results.get(timeout=10) for _ in racers) == ["created", "found", "found"]
    counter = context.Process(target=count_labels, args=(str(SOFTHSM_CONF), TEST_TOKEN_LABEL, TEST_PIN, label, results))
    counter.start()
    counter.join(timeout=120)
    assert results.get(timeout=10) == 1


def test_the_single_chain_of_revision_0010_verifies_as_chain_1_and_goes_on_among_others(
    blank_database_url: str, hsm: Hsm
) -> None:
    """Migration 0013: the single sealed chain becomes chain 1, verified as it was (against a
    checkpoint line of the single chain too), then continued by changes beside a writer's chain."""
    key = AuditKey(hsm)
    engine = make_engine(blank_database_url)
    try:
        upgrade(engine, "0010")
        single = chain([entry(n) for n in range(1, 7)], 0, GENESIS_HASH)
        single[2], single[5] = seal(key, single[2]), seal(key, single[5])  # two group commits
        with engine.begin() as connection:
            table = Table("audit_records", MetaData(), autoload_with=connection)
            rows = [{**_row(r.fields()), "seal": r.seal, "time": r.entry.time} for r in single]
            connection.execute(insert(table), [{k: v for k, v in row.items() if k in table.c} for row in rows])
            head = Table("audit_head", MetaData(), autoload_with=connection)
            connection.execute(update(head).values(last_seq=6, last_hash=single[-1].hash))
        migrate(engine)
        store = AuditRecords(engine, key)
        old_line = latest_checkpoint([f"audit checkpoint seq=6 hash={single[-1].hash}"])
        assert (store.verify(old_line).ok, store.verify().records) == (True, 6)
        store.append_current([(entry(7), None)])
        with engine.begin() as connection:
            (changed,) = append(connection, [entry(8)], key)
        assert (changed.chain, changed.seq, changed.prev_hash) == (1, 7, single[-1].hash)
        assert store.writer_chain not in (None, 1)
        listed = store.query(AuditQuery())
        assert [r.position for r in listed] == list(range(1, 9))
        assert [(r.chain, r.seq) for r in listed[:6]] == [(1, n) for n in range(1, 7)]
        result = store.verify(old_line)
        assert (result.ok, result.records) == (True, 8)
    finally:
        engine.dispose()
