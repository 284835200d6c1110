"""``keymanager serve`` without flags: one worker per CPU, each pinned where that is safe (real servers)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from keymanager.serving.affinity import CpuBudget
from tests.e2e.conftest import Server, running_server


def announcement(server: Server) -> str:
    """The line ``keymanager serve`` prints once ready."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [line for line in server.log.read_text().splitlines() if line.startswith("keymanager serving")]
        if lines:
            return lines[0]
        time.sleep(0.1)
    raise AssertionError(server.log.read_text()[-2000:])


def affinities(pid: int) -> list[set[int]]:
    """The CPUs each thread of process ``pid`` may run on."""
    return [os.sched_getaffinity(int(task.name)) for task in Path(f"/proc/{pid}/task").iterdir()]


def pinned_cpus(pids: list[int]) -> list[set[int]]:
    """The CPU of each process once all its threads are on one, waiting for workers still starting
    (the server is ready as soon as one worker answers)."""
    deadline = time.monotonic() + 30
    while True:
        threads = [affinities(pid) for pid in pids]
        if all(len(cpus) == 1 and cpus == found[0] for found in threads for cpus in found):
            return [found[0] for found in threads]
        assert time.monotonic() < deadline, threads
        time.sleep(0.2)


@pytest.mark.own_server
def test_the_default_is_a_worker_per_cpu_each_on_a_cpu_of_its_own(tmp_path: Path) -> None:
    expected = CpuBudget.of_this_process()
    assert expected.pinning(expected.workers())[0], "this machine runs the tests alone: pinning is safe"
    with running_server(tmp_path, workers=None) as server:
        line = announcement(server)
        workers = server.worker_pids() if expected.workers() > 1 else [server.pid]
        cpus = pinned_cpus(workers)
    assert f"with {expected.workers()} worker(s), each on a CPU of its own" in line
    assert len(workers) == expected.workers() == len(os.sched_getaffinity(0))  # 2 on the development machine
    assert sorted(min(cpu) for cpu in cpus) == sorted(os.sched_getaffinity(0))


@pytest.mark.own_server
def test_a_worker_claims_a_cpu_of_its_allowed_set_only(tmp_path: Path) -> None:
    allowed = os.sched_getaffinity(0)
    last = max(allowed)
    os.sched_setaffinity(0, {last})  # inherited by the server: as `taskset -c <last> keymanager serve`
    try:
        with running_server(tmp_path, workers=None) as server:
            line = announcement(server)
    finally:
        os.sched_setaffinity(0, allowed)
    assert "with 1 worker(s), each on a CPU of its own (1 allowed CPUs" in line
    assert sorted(p.name for p in (server.var_dir / "run").iterdir()) == [f"cpu-{last}.lock"]


@pytest.mark.own_server
def test_an_explicit_setting_wins_over_the_detection(tmp_path: Path) -> None:
    allowed = os.sched_getaffinity(0)
    with running_server(tmp_path, workers=2, KM_CPU_AFFINITY="false") as server:
        line = announcement(server)
        threads = [cpus for pid in server.worker_pids() for cpus in affinities(pid)]
    assert "with 2 worker(s), not pinned to CPUs (KM_CPU_AFFINITY=false)" in line
    assert threads and all(cpus == allowed for cpus in threads)
    assert not (server.var_dir / "run").exists()
