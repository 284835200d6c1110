"""A killed ``keymanager serve`` leaves no worker behind (``serving/orphans.py``; real servers)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import running_server

DEADLINE = 30.0
"""Seconds the workers have to end: uvicorn's graceful shutdown of a worker, on a loaded machine."""


def alive(pid: int) -> bool:
    """``pid`` runs (it exists and is not a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.own_server
def test_the_workers_end_when_the_serving_process_is_killed(tmp_path: Path) -> None:
    with running_server(tmp_path, workers=2) as server:
        workers = server.worker_pids()
        assert len(workers) == 2 and all(alive(pid) for pid in workers)
        os.kill(server.pid, signal.SIGKILL)  # no chance to stop its workers
        deadline = time.monotonic() + DEADLINE
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in workers if alive(pid)]
        for pid in left:  # the test's own mess, before the verdict
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"workers still serving {DEADLINE:.0f} s after their serving process was killed"


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` but multiprocessing's resource tracker (each thread's: a thread
    lists the children it started)."""
    found = [c for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]
    return [int(c) for c in found if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()]


@pytest.mark.own_server
def test_the_key_pair_process_ends_when_its_serving_process_is_killed(tmp_path: Path) -> None:
    """The key-pair lane's child (``hsm/lane.py``) is spawned by whichever thread first generates,
    so it watches for its parent instead of asking for a signal when that thread ends."""
    with running_server(tmp_path, workers=1) as server:
        with server.client(server.admin_token) as admin:
            made = admin.post(
                "/v1/keys", json={"name": "orphan-pair", "algorithm": "ECC_NIST_P256", "usage": "SIGN_VERIFY"}
            )
        assert made.status_code == 201, made.text
        lane = children(server.pid)
        assert len(lane) == 1 and alive(lane[0])
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + DEADLINE
        while alive(lane[0]) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = alive(lane[0])
        if left:
            os.kill(lane[0], signal.SIGKILL)
    assert not left, f"the key-pair process outlived its serving process by {DEADLINE:.0f} s"
