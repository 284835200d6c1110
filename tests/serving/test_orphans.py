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
