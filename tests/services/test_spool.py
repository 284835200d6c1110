"""The spool: a quota per process, files removed when closed or refused, dead processes' areas removed."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from keymanager.errors import PayloadTooLarge, SpoolBusy
from keymanager.services.spool import LOCK_SUFFIX, SpoolArea, remove_dead
from tests.support.spool_child import hold_area


def files_in(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(LOCK_SUFFIX)]


def test_a_spool_file_is_written_read_and_removed(tmp_path: Path) -> None:
    area = SpoolArea(tmp_path / "spool", quota=1000)
    spool = area.open()
    spool.write(b"a" * 300)
    spool.write(b"b" * 200)
    spool.seek(0)
    assert spool.read(1000) == b"a" * 300 + b"b" * 200
    assert area.used == 500
    assert len(files_in(tmp_path / "spool")) == 1
    spool.close()
    spool.close()
    assert area.used == 0
    assert files_in(tmp_path / "spool") == []
    area.close()
    assert list((tmp_path / "spool").iterdir()) == []


def test_the_quota_refuses_busy_and_too_large(tmp_path: Path) -> None:
    area = SpoolArea(tmp_path / "spool", quota=1000)
    first = area.open(expected=600)
    assert area.used == 600
    with pytest.raises(SpoolBusy) as busy:
        area.open(expected=500)  # would fit alone: later
    assert busy.value.status == 503 and busy.value.retry_after
    with pytest.raises(PayloadTooLarge):
        area.open(expected=1001)  # can never fit
    second = area.open()
    second.write(b"x" * 400)
    with pytest.raises(SpoolBusy):
        second.write(b"x")
    assert area.used == 1000
    second.close()
    first.close()
    assert area.used == 0
    assert files_in(tmp_path / "spool") == []
    third = area.open()
    with pytest.raises(PayloadTooLarge):
        third.write(b"x" * 1001)
    third.close()
    assert area.used == 0


def test_areas_of_dead_processes_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    children = [context.Process(target=hold_area, args=(str(root), ready)) for _ in range(2)]
    for child in children:
        child.start()
    owners = dict(ready.get(timeout=60) for _ in children)
    mine = SpoolArea(root, quota=1 << 20)
    spool = mine.open()
    spool.write(b"ciphertext")
    assert len(files_in(root)) == 3
    assert remove_dead(root) == 0  # everyone alive

    dead, alive = children
    os.kill(dead.pid, signal.SIGKILL)
    dead.join(timeout=60)
    (root / "stray-dir").mkdir()  # an area whose lock file is gone: a leftover
    assert remove_dead(root) == 2
    assert mine.directory is not None
    kept = {owners[alive.pid], mine.directory.name}
    assert sorted(p.name for p in root.iterdir()) == sorted([*kept, *(f"{k}{LOCK_SUFFIX}" for k in kept)])
    assert len(files_in(root)) == 2
    spool.close()
    mine.close()
    alive.terminate()
    alive.join(timeout=60)


def test_claiming_races_with_cleaners_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    for _ in range(50):
        area = SpoolArea(root, quota=100)
        spool = area.open()
        remove_dead(root)
        spool.write(b"still mine")
        spool.seek(0)
        assert spool.read(100) == b"still mine"
        assert area.directory is not None and area.directory.is_dir()
        spool.close()
        area.close()
    assert list(root.iterdir()) == []


def test_a_spool_that_cannot_be_written_answers_busy(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_bytes(b"")
    with pytest.raises(SpoolBusy):
        SpoolArea(blocked, quota=100).open()  # no area can be made there
    area = SpoolArea(tmp_path / "spool", quota=100)
    spool = area.open()
    spool.attach(open("/dev/full", "wb", buffering=0))  # noqa: SIM115 (a full disk, injected)
    with pytest.raises(SpoolBusy):
        spool.write(b"x")
    spool.close()
    assert area.used == 0
    area.close()
