"""Faults under load, on real servers: a worker killed in the middle of its commits, PostgreSQL
restarted (a private server of the test's own, stopped the way a crash stops it), a replica
whose clock is seconds off (its time injected at its start, ``tests/support/skewed_clock``,
not the system clock).

After each: every acknowledged request (a 200 answer) has its audit record, and every chain
verifies (a killed writer's chain up to its last commit; a restarted worker writes a new one).
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.replicas.conftest import (
    Load,
    Node,
    app_and_key,
    audited_request_ids,
    children,
    install,
    running,
    verified,
)
from tests.support.postgres import create_database, drop_database
from tests.support.private_postgres import private_postgres

pytestmark = pytest.mark.postgres

SKEWED_CLOCK = Path(__file__).resolve().parent.parent / "support" / "skewed_clock"
SKEW_SECONDS = 5


@pytest.fixture
def database() -> Iterator[str]:
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)


def workers(node: Node) -> list[int]:
    """The worker processes of ``node`` (uvicorn's spawned children)."""
    return sorted(
        pid for pid in children(node.process.pid) if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    )


def writer_chains(url: str) -> list[tuple[int, int]]:
    """(id, last_seq) of every writer chain of the database at ``url``."""
    server = make_url(url)
    conninfo = f"host={server.host} port={server.port} user={server.username} dbname={server.database}"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        rows = connection.execute("SELECT id, last_seq FROM audit_chains WHERE kind = 'writer' ORDER BY id").fetchall()
    return [(int(chain), int(seq)) for chain, seq in rows]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.own_server
def test_a_worker_killed_mid_commit_loses_no_acknowledged_record(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("database") if backend == "postgresql" else f"sqlite:///{tmp_path / 'var' / 'km.db'}"
    installation = install(tmp_path, url)
    with running(installation, "killed", "--workers", "2") as node:
        token = app_and_key(node, installation.admin_token)
        with Load([node], token, "faulty", threads=8) as load:
            load.wait_for(200)
            victim = workers(node)[0]
            chains = writer_chains(url) if backend == "postgresql" else []
            os.kill(victim, signal.SIGKILL)  # under this load its writer is committing, or about to
            load.wait_for(len(load.acknowledged) + 300)  # the other worker, then the new one, serve on
            deadline = time.monotonic() + 60
            while (
                victim in workers(node) or len(workers(node)) < 2 or (chains and len(writer_chains(url)) <= len(chains))
            ):
                assert time.monotonic() < deadline, "the killed worker was not replaced by one with a chain of its own"
                time.sleep(0.1)
            load.wait_for(len(load.acknowledged) + 100)
        assert set(load.acknowledged) <= audited_request_ids(node, installation.admin_token)
        verdict = verified(node, installation.admin_token)
    assert verdict["ok"] is True, verdict
    if chains:  # the killed worker's chain stays, verified; its successor opened a new one
        assert len(writer_chains(url)) > len(chains)


@pytest.mark.own_server
def test_postgresql_restarted_under_load_loses_no_acknowledged_record(tmp_path: Path) -> None:
    with private_postgres() as server:
        url = server.create_database("km_restarted")
        installation = install(tmp_path, url, KM_AUDIT_WRITER_LANES="2")
        with running(installation, "restarted", "--workers", "2") as node:
            token = app_and_key(node, installation.admin_token)
            with Load([node], token, "faulty", threads=8) as load:
                load.wait_for(200)
                server.stop(immediate=True)  # no checkpoint, no goodbye to the clients: as a crash
                time.sleep(0.2)  # away a moment longer than stopping and starting take
                server.start()
                before = len(load.acknowledged)
                load.wait_for(before + 300, timeout=90)  # the service recovers by itself
            assert set(load.acknowledged) <= audited_request_ids(node, installation.admin_token)
            verdict = verified(node, installation.admin_token)
    assert verdict["ok"] is True, verdict
    assert set(load.refused) <= {0, 503}, load.refused  # refused while the server was away, never a 500


def _skewed(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the wall clock of the processes it starts ``SKEW_SECONDS`` behind (``sitecustomize``)."""
    path = os.pathsep.join(p for p in (str(SKEWED_CLOCK), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, "SKEWED_CLOCK_SECONDS": str(-SKEW_SECONDS)}


@pytest.mark.own_server
def test_a_replica_with_its_clock_seconds_behind_keeps_every_record_and_the_merge_order(
    tmp_path: Path, database: str
) -> None:
    installation = install(tmp_path, database)
    with (
        running(installation, "on-time", "--workers", "1") as on_time,
        running(installation, "behind", "--workers", "1", env=_skewed(installation.env)) as behind,
    ):
        token = app_and_key(on_time, installation.admin_token)
        with (
            Load([on_time], token, "faulty", threads=4) as load_a,
            Load([behind], token, "faulty", threads=4) as load_b,
        ):
            load_a.wait_for(200)
            load_b.wait_for(200)
        records = _records(on_time, installation.admin_token)
        verdict = verified(behind, installation.admin_token)
    assert verdict["ok"] is True, verdict
    ids = {r["request_id"] for r in records}
    assert set(load_a.acknowledged) | set(load_b.acknowledged) <= ids
    positions = [r["position"] for r in records]
    assert positions == sorted(positions)  # the listing follows the database's order
    for chain in {r["chain"] for r in records}:
        seqs = [r["seq"] for r in records if r["chain"] == chain]
        assert seqs == sorted(seqs)  # and within each chain its sequence
    assert _lag_of(records, set(load_b.acknowledged)) > SKEW_SECONDS - 2  # the skew was real, and did not reorder


def _records(node: Node, admin_token: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = 0
    with node.client(admin_token) as admin:
        while True:
            body = admin.get("/v1/audit", params={"action": "key.encrypt", "after": after, "limit": 1000}).json()
            found.extend(body["records"])
            if body["next"] is None:
                return found
            after = body["next"]


def _lag_of(records: list[dict[str, Any]], behind: set[str]) -> float:
    """How far, in the median, the skewed replica's records are stamped before the on-time
    replica's record stored just before them."""
    lags = []
    last_on_time: datetime | None = None
    for record in records:
        moment = datetime.fromisoformat(record["time"])
        if record["request_id"] not in behind:
            last_on_time = moment
        elif last_on_time is not None:
            lags.append((last_on_time - moment).total_seconds())
    return statistics.median(lags)
