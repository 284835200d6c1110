"""Checkpoints of the audit chain: one line to the log and to the checkpoint file, read back."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from sqlalchemy import Engine

from keymanager.db import make_engine, migrate
from keymanager.db.audit import AuditRecords
from keymanager.domain.checkpoint import ChainHead, Checkpoint, latest_checkpoint
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.services.audit_chain import AuditChain
from tests.db.test_audit import entry


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / 'keymanager.db'}")
    migrate(engine)
    return engine


def test_in_development_checkpoint_lines_follow_the_service_level(
    engine: Engine, hsm: Hsm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = AuditKey(hsm)
    store = AuditRecords(engine, key)
    store.append_current([(entry(n), None) for n in range(2)])
    file = tmp_path / "checkpoints"
    audit_chain = AuditChain(store, key, checkpoint_file=file, checkpoints_always_logged=False)
    service = logging.getLogger("keymanager")
    level = service.level
    try:
        service.setLevel(logging.WARNING)  # the default level
        with caplog.at_level(logging.INFO, logger="keymanager.audit.checkpoint"):
            audit_chain.emit_checkpoint(always=True)
            assert caplog.records == []
            service.setLevel(logging.INFO)
            shown = audit_chain.emit_checkpoint(always=True)
        assert [r.getMessage() for r in caplog.records] == [shown.line()]
    finally:
        service.setLevel(level)
    assert len(file.read_text().splitlines()) == 2  # the file gets every line


def test_a_checkpoint_is_one_log_line_and_one_file_line(
    engine: Engine, hsm: Hsm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = AuditKey(hsm)
    store = AuditRecords(engine, key)
    store.append_current([(entry(n), None) for n in range(3)])
    file = tmp_path / "elsewhere" / "checkpoints"
    file.parent.mkdir()
    audit_chain = AuditChain(store, key, checkpoint_file=file)
    with caplog.at_level(logging.INFO, logger="keymanager.audit.checkpoint"):
        first = audit_chain.emit_checkpoint()
        audit_chain.emit_checkpoint()  # the head did not move: nothing more
        store.append_current([(entry(3), None)])
        second = audit_chain.emit_checkpoint()
        audit_chain.emit_checkpoint(always=True)  # as at shutdown
    chain = store.writer_chain
    assert chain is not None and (first.heads[chain].seq, second.heads[chain].seq) == (3, 4)
    assert [r.getMessage() for r in caplog.records] == [first.line(), second.line(), second.line()]
    lines = file.read_text().splitlines()
    assert len(lines) == 3 and lines[0].endswith(first.line())
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert latest_checkpoint(lines) == second == store.head()
    assert store.verify(second).ok


def test_an_unwritable_checkpoint_file_leaves_the_log_line(
    engine: Engine, hsm: Hsm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = AuditKey(hsm)
    audit_chain = AuditChain(AuditRecords(engine, key), key, checkpoint_file=tmp_path / "missing-dir" / "file")
    with caplog.at_level(logging.INFO):
        audit_chain.emit_checkpoint()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == Checkpoint().line() == "audit checkpoint chains=0"  # no chain holds records yet
    assert "audit checkpoint not written to its file: FileNotFoundError" in messages


def test_the_latest_checkpoint_of_a_log_is_the_highest_head_of_each_chain() -> None:
    hashes = ["a" * 64, "b" * 64, "c" * 64, "e" * 64]
    log = [
        f"2026-11-30 22:00:00,000 INFO keymanager.audit.checkpoint: audit checkpoint seq=12 hash={hashes[0]}",
        "2026-11-30 22:00:01,000 WARNING keymanager.x: something else seq=99",
        f"audit checkpoint chains=2 1:30:{hashes[1]} 7:5:{hashes[3]}",
        f"audit checkpoint chains=1 1:20:{hashes[2]}",  # another worker, older
        f"audit checkpoint chains=2 1:99:{'d' * 64}",  # cut short: not a checkpoint
        f"audit checkpoint seq=98 hash={'d' * 63}",  # cut short: not a checkpoint
    ]
    assert latest_checkpoint(log) == Checkpoint.of([ChainHead(1, 30, hashes[1]), ChainHead(7, 5, hashes[3])])
    assert latest_checkpoint(log[:1]) == Checkpoint.of([ChainHead(1, 12, hashes[0])])  # the single chain's lines
    assert latest_checkpoint(["nothing here"]) is None


def test_a_checkpoint_line_reads_back_as_itself() -> None:
    checkpoint = Checkpoint.of([ChainHead(9, 3, "f" * 64), ChainHead(1, 12, "0" * 64)])
    assert checkpoint.line() == f"audit checkpoint chains=2 1:12:{'0' * 64} 9:3:{'f' * 64}"
    assert latest_checkpoint([checkpoint.line()]) == checkpoint
