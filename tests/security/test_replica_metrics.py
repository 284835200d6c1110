"""Replicas sharing one ``KM_VAR_DIR`` keep their own metrics: starting one never clears another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.metrics_support import reaches, settled
from tests.security.conftest import Server, running_server


def _series(server: Server) -> set[str]:
    with server.client(server.admin_token) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    return {line.split(" ")[0] for line in answer.text.splitlines() if line.startswith("km_requests_total{")}


def _replica_dirs(var_dir: Path) -> list[Path]:
    return sorted(p for p in (var_dir / "metrics").iterdir() if p.is_dir())


@pytest.mark.own_server
def test_a_second_replica_leaves_the_first_ones_metrics(tmp_path: Path) -> None:
    with running_server(tmp_path, workers=1) as first:
        with first.client(first.admin_token) as client:
            for path in ("/v1/health", "/v1/keys", "/v1/principals", "/v1/keys/missing"):
                client.get(path)
        before = _series(first)
        assert len(before) >= 4
        with running_server(tmp_path, workers=1) as second:
            assert second.var_dir == first.var_dir
            assert len(_replica_dirs(first.var_dir)) == 2
            assert before <= _series(first)
            assert _series(second) <= {s for s in _series(second) if "/metrics" in s or "/v1/ready" in s}
            second_dir = next(p for p in _replica_dirs(first.var_dir) if p.name.endswith(f"-{second.pid}"))
        # uvicorn re-raises SIGTERM after its shutdown, so a stopped replica's directory stays
        # until the next replica starts and finds its lock free.
        with running_server(tmp_path, workers=1) as third:
            dirs = _replica_dirs(first.var_dir)
            assert second_dir not in dirs
            assert {p.name.rsplit("-", 1)[1] for p in dirs} == {str(first.pid), str(third.pid)}
            assert before <= _series(first)


@pytest.mark.own_server
def test_a_dead_replicas_directory_is_removed_at_start(tmp_path: Path) -> None:
    stale = tmp_path / "var" / "metrics" / "gone-host-12345"
    stale.mkdir(parents=True)
    (stale / "counter_1.db").write_bytes(b"x")
    (stale.parent / "gone-host-12345.lock").write_bytes(b"")
    with running_server(tmp_path, workers=1) as server:
        assert not stale.exists()
        assert len(_replica_dirs(server.var_dir)) == 1


def _keys_requests(server: Server) -> float:
    """``/v1/keys`` requests counted by the replica's metrics, summed over its workers' series."""
    with server.client(server.admin_token) as client:
        text = client.get("/metrics").text
    counted = [line for line in text.splitlines() if line.startswith("km_requests_total{") and '"/v1/keys"' in line]
    return sum(float(line.rsplit(" ", 1)[1]) for line in counted)


def test_one_replica_sums_its_own_workers(server: Server) -> None:
    """The session's two-worker server: its metrics count every request whichever worker served it."""
    assert len(server.worker_pids()) == 2
    before = settled(lambda: _keys_requests(server))
    with server.client(server.admin_token) as client:
        for _ in range(20):
            assert client.get("/v1/keys").status_code == 200
    assert reaches(lambda: _keys_requests(server), before + 20) == before + 20
