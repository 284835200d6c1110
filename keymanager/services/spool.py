"""The spool: files where streams keep ciphertext (never plaintext) while an upload completes.

Each process owns an area under the spool directory: ``<owner>.lock`` and ``<owner>/``, where
``owner`` is ``<pid>-<random>``. The process holds an exclusive ``flock`` on its lock file for as
long as it lives, so any other process sharing the directory (workers, replicas on one
``var/``) can tell a live owner from a dead one without trusting pids, which are reused and
differ between containers: a lock file whose lock can be taken belongs to a process that is
gone, and :func:`remove_dead` removes that area. A process claims its area on its first stream.

The bytes of all spool files of a process are bounded by its quota: a file that would take
more than is free raises :class:`~keymanager.errors.SpoolBusy` (503 with ``Retry-After``), one
that alone exceeds the quota raises :class:`~keymanager.errors.PayloadTooLarge`. A refused or
closed file is removed at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from keymanager.errors import PayloadTooLarge, SpoolBusy

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
_CLAIM_ATTEMPTS = 5


class SpoolArea:
    """This process's spool files under ``root``, within ``quota`` bytes; thread-safe."""

    def __init__(self, root: Path, *, quota: int) -> None:
        self.root = root
        self.quota = quota
        self._lock = threading.Lock()
        self._used = 0
        self._owner: str | None = None
        self._lock_fd: int | None = None
        self._pid = os.getpid()

    @property
    def used(self) -> int:
        """Bytes reserved by this process's open spool files."""
        return self._used

    @property
    def directory(self) -> Path | None:
        """This process's directory once claimed (None before its first stream)."""
        return None if self._owner is None else self.root / self._owner

    def open(self, expected: int = 0) -> SpoolFile:
        """A new spool file with ``expected`` bytes reserved up front (SpoolBusy or PayloadTooLarge now)."""
        spool = SpoolFile(self)
        try:
            spool.reserve(expected)
            with _unwritable_as_busy():
                spool.attach(tempfile.NamedTemporaryFile(dir=self._claimed(), prefix="stream-"))  # noqa: SIM115
        except BaseException:
            spool.close()
            raise
        return spool

    def close(self) -> None:
        """Remove this process's area (its open files are gone with it) and release its lock."""
        with self._lock:
            owner, fd, self._owner, self._lock_fd = self._owner, self._lock_fd, None, None
        if owner is None or fd is None or self._pid != os.getpid():
            return
        shutil.rmtree(self.root / owner, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (self.root / f"{owner}{LOCK_SUFFIX}").unlink()
        os.close(fd)

    def grow(self, nbytes: int, file_total: int) -> None:
        """Reserve ``nbytes`` more for a file that will then hold ``file_total`` bytes."""
        with self._lock:
            if self._used + nbytes > self.quota:
                if file_total > self.quota:
                    raise PayloadTooLarge(f"a stream is limited to {self.quota} bytes of spool")
                raise SpoolBusy()
            self._used += nbytes

    def release(self, nbytes: int) -> None:
        with self._lock:
            self._used -= nbytes

    def _claimed(self) -> Path:
        """This process's directory, claimed (lock file locked, then directory made) on first use."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child owns nothing of its parent's
                self._owner, self._lock_fd, self._used, self._pid = None, None, 0, os.getpid()
            if self._owner is None:
                self._owner, self._lock_fd = _claim(self.root)
            return self.root / self._owner


class SpoolFile:
    """One spool file: written while the upload arrives, read back while the answer is sent."""

    def __init__(self, area: SpoolArea) -> None:
        self._area = area
        self._file: IO[bytes] | None = None
        self.size = 0
        self._reserved = 0

    def attach(self, file: IO[bytes]) -> None:
        self._file = file

    def reserve(self, total: int) -> None:
        """Make sure ``total`` bytes are reserved for this file."""
        if total > self._reserved:
            self._area.grow(total - self._reserved, total)
            self._reserved = total

    def write(self, data: bytes) -> None:
        """Append ``data``; SpoolBusy or PayloadTooLarge when the quota does not allow it."""
        self.reserve(self.size + len(data))
        with _unwritable_as_busy():
            self._require().write(data)
        self.size += len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._require().seek(offset, whence)

    def read(self, nbytes: int) -> bytes:
        return self._require().read(nbytes)

    def close(self) -> None:
        """Remove the file and give its bytes back to the quota (idempotent)."""
        file, self._file = self._file, None
        if file is not None:
            file.close()
        reserved, self._reserved = self._reserved, 0
        if reserved:
            self._area.release(reserved)

    def _require(self) -> IO[bytes]:
        if self._file is None:
            raise ValueError("the spool file is closed")
        return self._file


@contextlib.contextmanager
def _unwritable_as_busy() -> Iterator[None]:
    """A spool that cannot be written (disk full, read-only) answers 503, as a full quota does."""
    try:
        yield
    except OSError as exc:
        log.warning("the spool could not be written: %s", type(exc).__name__)
        raise SpoolBusy("the spool cannot be written for now; retry later") from None


def _claim(root: Path) -> tuple[str, int]:
    """A new owner name under ``root`` and the descriptor holding its lock."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    for _ in range(_CLAIM_ATTEMPTS):
        owner = f"{os.getpid()}-{secrets.token_hex(4)}"
        path = root / f"{owner}{LOCK_SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # A cleaner may have taken the fresh lock file for a dead one's and removed it.
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                (root / owner).mkdir(mode=0o700)
                return owner, fd
        except (BlockingIOError, FileNotFoundError):
            pass
        os.close(fd)
    raise OSError("could not claim a spool area")


def remove_dead(root: Path) -> int:
    """Remove the spool areas under ``root`` whose process is gone; how many were removed.

    Safe while other processes claim, use and clean areas of the same directory.
    """
    if not root.is_dir():
        return 0
    removed = 0
    for lock in root.glob(f"*{LOCK_SUFFIX}"):
        if _remove_if_dead(root, lock):
            removed += 1
    locks = {p.name.removesuffix(LOCK_SUFFIX) for p in root.glob(f"*{LOCK_SUFFIX}")}
    for entry in root.iterdir():
        # An area is made after its lock file and removed before it: a directory without
        # one is a leftover (of a cleaner stopped half-way).
        if entry.is_dir() and entry.name not in locks and not (root / f"{entry.name}{LOCK_SUFFIX}").exists():
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    if removed:
        log.info("removed %d spool area(s) of processes that are gone", removed)
    return removed


def _remove_if_dead(root: Path, lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its owner is alive
        if not lock.exists() or os.stat(lock).st_ino != os.fstat(fd).st_ino:
            return False  # removed by another cleaner meanwhile
        shutil.rmtree(root / lock.name.removesuffix(LOCK_SUFFIX), ignore_errors=True)
        lock.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)
