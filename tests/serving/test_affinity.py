"""Workers pinned each to a CPU of its own (``serving/affinity.py``): claims, release, and real affinity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from keymanager.serving.affinity import claim_cpu

WORKER = """
import json, os, sys, threading
from pathlib import Path
started = threading.Event()
threading.Thread(target=started.wait, daemon=True).start()  # a thread that exists before pinning
if sys.argv[2] == "factory":
    from keymanager.serving.app import worker_app
    worker_app()
    cpu = None
else:
    from keymanager.serving.affinity import pin_worker
    cpu = pin_worker(Path(sys.argv[1]))
tasks = sorted(os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task"))
print(json.dumps({"cpu": cpu, "tasks": [sorted(t) for t in tasks]}), flush=True)
sys.stdin.read()  # hold the claim until the test closes stdin
"""


def start_worker(run_dir: Path, mode: str = "pin", **env: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(run_dir), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert process.stdout is not None
    return process, json.loads(process.stdout.readline())


def stop(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=10)


def test_claims_take_free_cpus_and_are_released_on_close(tmp_path: Path) -> None:
    first = claim_cpu(tmp_path, {0, 1})
    second = claim_cpu(tmp_path, {0, 1})
    assert first is not None and second is not None
    assert (first[0], second[0]) == (0, 1)
    assert claim_cpu(tmp_path, {0, 1}) is None  # more workers than CPUs: the rest stay unpinned
    os.close(first[1])
    again = claim_cpu(tmp_path, {0, 1})
    assert again is not None and again[0] == 0  # a restarted worker takes the CPU left free
    os.close(second[1])
    os.close(again[1])


def test_two_workers_run_on_different_cpus_with_all_their_threads(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    one, first = start_worker(tmp_path)
    two, second = start_worker(tmp_path)
    try:
        pinned = [first, second] if len(allowed) > 1 else [first]
        assert [report["cpu"] for report in pinned] == allowed[: len(pinned)]
        for report in pinned:
            assert report["tasks"] == [[report["cpu"]]] * len(report["tasks"])  # type: ignore[arg-type]
            assert len(report["tasks"]) >= 2  # type: ignore[arg-type]
        if len(allowed) == 1:
            assert second["cpu"] is None
    finally:
        stop(one)
        stop(two)
    three, third = start_worker(tmp_path)  # both exited: their CPUs are free again
    stop(three)
    assert third["cpu"] == min(os.sched_getaffinity(0))


def test_a_worker_pins_itself_only_when_the_setting_says_so(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    process, report = start_worker(tmp_path, "factory", KM_VAR_DIR=str(tmp_path))  # keymanager serve decides
    stop(process)
    assert all(task == allowed for task in report["tasks"])  # type: ignore[union-attr]
    assert not (tmp_path / "run").exists()
    pinned, report = start_worker(tmp_path, "factory", KM_VAR_DIR=str(tmp_path), KM_CPU_AFFINITY="true")
    stop(pinned)
    assert all(len(task) == 1 for task in report["tasks"]) or len(allowed) == 1  # type: ignore[union-attr]
