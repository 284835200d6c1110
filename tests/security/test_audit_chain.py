"""Attack: rewrite the audit log of a running server in its database (SQLite under var/).

Someone who can write the database but cannot use the HSM re-hashes the tail after editing a
record (caught by the seals, through ``/v1/audit/verify``), or cuts the tail back to an earlier
seal (caught by ``keymanager audit verify --checkpoint`` with a checkpoint from the server's
checkpoint file or its log).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from keymanager.db import make_engine
from keymanager.db.audit import AuditRecords
from keymanager.domain.checkpoint import Checkpoint, latest_checkpoint
from tests.db.test_audit_chain import records, rewrite_from, truncate_to
from tests.e2e.conftest import keymanager
from tests.security.conftest import Server, running_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("audit-chain")
    with running_server(
        home,
        workers=2,
        KM_AUDIT_CHECKPOINT_FILE=str(home / "checkpoints"),
        KM_AUDIT_CHECKPOINT_INTERVAL_SECONDS="0.2",
        KM_LOG_LEVEL="info",  # a development server logs its checkpoint lines from info up
    ) as started:
        yield started


@pytest.fixture(scope="module")
def database(server: Server) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{server.var_dir / 'keymanager.db'}")
    yield engine
    engine.dispose()


def traffic(server: Server, count: int) -> None:
    with server.client(server.admin_token) as admin:
        for n in range(count):
            assert admin.post("/v1/keys", json={"name": f"k{time.monotonic_ns()}-{n}", "policy": {}}).status_code == 201


def checkpoint_reaching(path: Path, head: Checkpoint) -> Checkpoint:
    """The latest checkpoint in ``path`` once it has reached ``head`` on every chain (30 s deadline)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = latest_checkpoint(path.read_text().splitlines()) if path.exists() else None
        if found is not None and all(c in found.heads and found.heads[c].seq >= h.seq for c, h in head.heads.items()):
            return found
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint reached {head.line()} in 30 s")


def test_a_cut_tail_is_caught_against_the_servers_checkpoints(server: Server, database: Engine) -> None:
    traffic(server, 12)
    store = AuditRecords(database)
    head = store.head()
    checkpoint = checkpoint_reaching(server.var_dir.parent / "checkpoints", head)
    assert checkpoint == head  # nothing was written since
    chain = records(store)  # the chain of the newest record: key creations, in a changes chain
    sealed = [r.seq for r in chain if r.seal is not None and r.seq < chain[-1].seq - 2]
    truncate_to(database, store, sealed[-1])

    for source in (server.var_dir.parent / "checkpoints", server.log):
        result = keymanager("audit", "verify", "--checkpoint", str(source), env=server.env, cwd=server.var_dir.parent)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"BROKEN at record {sealed[-1] + 1}" in result.stdout
        assert "records were removed" in result.stdout


def test_a_rehashed_tail_is_caught_by_the_api(server: Server, database: Engine) -> None:
    traffic(server, 4)
    store = AuditRecords(database)
    with server.client(server.admin_token) as admin:
        assert admin.get("/v1/audit/verify").json()["ok"] is True
        edited = records(store)[-1].seq - 2
        rewrite_from(database, store, edited, principal="mallory")
        verdict = admin.get("/v1/audit/verify").json()
    assert verdict["ok"] is False
    assert verdict["first_broken_seq"] <= edited
    assert "seal of record" in verdict["reason"]


@pytest.mark.own_server
def test_a_checkpoint_is_written_at_shutdown(tmp_path: Path) -> None:
    hourly = {"KM_AUDIT_CHECKPOINT_INTERVAL_SECONDS": "3600", "KM_LOG_LEVEL": "info"}  # info: see the server above
    with running_server(tmp_path, workers=1, **hourly) as stopped:
        traffic(stopped, 2)
    engine = make_engine(f"sqlite:///{stopped.var_dir / 'keymanager.db'}")
    try:
        head = AuditRecords(engine).head()
    finally:
        engine.dispose()
    lines = [line for line in stopped.log.read_text().splitlines() if "audit checkpoint" in line]
    assert len(lines) == 1  # the periodic one is an hour away
    assert latest_checkpoint(lines) == head and sum(h.seq for h in head.heads.values()) >= 2
