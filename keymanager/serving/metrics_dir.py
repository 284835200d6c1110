"""A Prometheus multiprocess directory per replica (``keymanager serve`` holds it while it runs)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replica_metrics_dir(root: Path) -> Iterator[Path]:
    """A Prometheus multiprocess directory of this replica's own, under ``root``, for as long as
    the block runs.

    Replicas sharing one ``KM_VAR_DIR`` each sum their own workers' samples: a replica starting
    removes only the directories whose replica is gone (its lock file no longer held), never a
    live one's. The lock is held by the ``keymanager serve`` process, which outlives its workers.
    """
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = f"{socket.gethostname()}-{os.getpid()}"
    lock = os.open(root / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _remove_stale_metrics(root, keep=name)
        mine = root / name
        shutil.rmtree(mine, ignore_errors=True)
        mine.mkdir(mode=0o700)
        yield mine
    finally:
        os.close(lock)
        shutil.rmtree(root / name, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (root / f"{name}.lock").unlink()


def _remove_stale_metrics(root: Path, keep: str) -> None:
    """Remove every replica directory under ``root`` whose lock nobody holds (its replica died).

    A replica creates and locks its lock file before its directory, so a directory without a
    lock file belongs to nobody.
    """
    for entry in sorted(root.iterdir()):
        replica = entry.name.removesuffix(".lock")
        if replica == keep:
            continue
        if entry.name.endswith(".lock"):
            try:
                fd = os.open(entry, os.O_RDWR)
            except FileNotFoundError:
                continue  # another replica removed it meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live replica
            finally:
                os.close(fd)
            shutil.rmtree(root / replica, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        elif not (root / f"{replica}.lock").exists():
            shutil.rmtree(entry, ignore_errors=True)
