"""Make SoftHSM calls hang for real: another process holds the fcntl lock of a token's ``generation`` file.

SoftHSM takes that lock (``F_SETLKW``, which waits for ever) whenever it searches or writes the
token's objects, so a PKCS#11 call of any process using the token blocks until the lock is released.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

_LOCKER = """
import fcntl, pathlib, sys
held = []
for path in pathlib.Path(sys.argv[1]).rglob("generation"):
    handle = open(path, "r+")
    fcntl.lockf(handle, fcntl.LOCK_EX)
    held.append(handle)
print(len(held), flush=True)
sys.stdin.read()  # hold the locks until our stdin is closed
"""


@contextlib.contextmanager
def token_locked(token_dir: Path) -> Iterator[None]:
    """Every token under ``token_dir`` is locked by another process until the block ends."""
    locker = subprocess.Popen(
        [sys.executable, "-c", _LOCKER, str(token_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert locker.stdout is not None and locker.stdin is not None
    try:
        assert int(locker.stdout.readline()) >= 1, "no SoftHSM token found to lock"
        yield
    finally:
        locker.stdin.close()
        locker.wait(timeout=30)
