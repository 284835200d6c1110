"""``keymanager audit verify [--checkpoint FILE_OR_LINE]`` as a subprocess on a real installation."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from keymanager.domain.checkpoint import latest_checkpoint
from tests.e2e.conftest import ROOT, keymanager, server_env


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``keymanager init``, then 3 sealed appends of 2 records (sealed at 2, 4, 6) and a checkpoint to a file."""
    home = tmp_path_factory.mktemp("cli-audit")
    env = environment(home)
    init = keymanager("init", env=env, cwd=home)
    assert init.returncode == 0, init.stderr
    assert "audit key 'keymanager-audit': created" in init.stdout
    appended = subprocess.run(
        [sys.executable, "-m", "tests.support.audit_child", "3"],
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert appended.returncode == 0, appended.stderr
    return home


def environment(home: Path) -> dict[str, str]:
    return server_env(home / "var", KM_AUDIT_CHECKPOINT_FILE=str(home / "checkpoints"))


def verify(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return keymanager("audit", "verify", *args, env=environment(home), cwd=home)


def forge_rows(home: Path, chain: int, seqs: list[int]) -> None:
    """Copies of the chain's last record stored as rows ``seqs`` (past its head, or below 1)."""
    with sqlite3.connect(home / "var" / "keymanager.db") as db:
        position = db.execute("SELECT MAX(position) FROM audit_records").fetchone()[0]
        columns = (
            "time, request_id, principal, action, key_id, key_version, outcome, status, client, details, prev_hash"
        )
        for offset, seq in enumerate(seqs, start=1):
            db.execute(
                f"INSERT INTO audit_records (chain_id, seq, position, hash, seal, {columns}) "
                f"SELECT chain_id, ?, ?, hash, NULL, {columns} FROM audit_records WHERE chain_id = ? "
                "ORDER BY seq DESC LIMIT 1",
                (seq, position + offset, chain),
            )


def test_rows_outside_a_chain_are_breaks_with_and_without_a_checkpoint(home: Path) -> None:
    checkpoint_file = home / "checkpoints"
    checkpoint = latest_checkpoint(checkpoint_file.read_text().splitlines())
    assert checkpoint is not None
    writer = max(checkpoint.heads)
    for seqs, broken, reason in (([7, 8], 7, "lies past the chain's head"), ([0], 0, "below 1"), ([-5], -5, "below 1")):
        forge_rows(home, writer, seqs)
        try:
            for args in ((), ("--checkpoint", str(checkpoint_file))):
                found = verify(home, *args)
                assert found.returncode == 1, found.stdout + found.stderr
                assert f"audit log BROKEN at record {broken} of chain {writer}" in found.stdout
                assert reason in found.stdout
        finally:
            with sqlite3.connect(home / "var" / "keymanager.db") as db:
                db.execute("DELETE FROM audit_records WHERE chain_id = ? AND (seq < 1 OR seq > 6)", (writer,))
    assert verify(home).returncode == 0


def test_the_chain_holds_the_checkpoint_until_its_tail_is_cut(home: Path) -> None:
    checkpoint_file = home / "checkpoints"
    checkpoint = latest_checkpoint(checkpoint_file.read_text().splitlines())
    assert checkpoint is not None
    writer = max(checkpoint.heads)  # the chain of the child's audit writer (chain 1 holds init's changes)
    assert checkpoint.heads[writer].seq == 6
    whole = verify(home, "--checkpoint", str(checkpoint_file))
    assert whole.returncode == 0, whole.stdout + whole.stderr
    heads = len(checkpoint.heads)
    assert f"every chain intact and sealed; checkpoint of {heads} chain heads contained" in whole.stdout

    with sqlite3.connect(home / "var" / "keymanager.db") as db:  # cut the writer's chain back to the seal of record 4
        db.execute("DELETE FROM audit_records WHERE chain_id = ? AND seq > 4", (writer,))
        db.execute(
            "UPDATE audit_chains SET last_seq = 4, last_hash = "
            "(SELECT hash FROM audit_records WHERE chain_id = ? AND seq = 4) WHERE id = ?",
            (writer, writer),
        )

    assert verify(home).returncode == 0  # without a checkpoint the cut is invisible
    for argument in (str(checkpoint_file), f"x INFO keymanager.audit.checkpoint: {checkpoint.line()}"):
        cut = verify(home, "--checkpoint", argument)
        assert cut.returncode == 1, cut.stdout + cut.stderr
        assert f"audit log BROKEN at record 5 of chain {writer}" in cut.stdout
        assert "records were removed" in cut.stdout


def test_a_checkpoint_argument_without_a_checkpoint_is_refused(home: Path) -> None:
    refused = verify(home, "--checkpoint", "seq=6 and nothing else")
    assert refused.returncode == 2
    assert "no 'audit checkpoint chains=…' line" in refused.stderr


def test_serve_refuses_to_start_without_the_key_that_sealed_the_chain(home: Path) -> None:
    env = {**environment(home), "KM_AUDIT_KEY_LABEL": "keymanager-audit-elsewhere"}
    refused = keymanager("serve", "--port", "1", env=env, cwd=home)
    assert refused.returncode == 1
    assert "keymanager cannot start: audit chain: the audit chain is sealed, but the token has no audit key" in (
        refused.stderr
    )
    assert "'keymanager-audit-elsewhere'" in refused.stderr
