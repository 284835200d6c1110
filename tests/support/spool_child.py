"""Work run in a child process by the spool tests (free of the fixtures' imports)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from keymanager.services.spool import SpoolArea


def hold_area(root: str, ready: Any) -> None:
    """Claim a spool area with one file in it, report (pid, area name), then wait to be killed."""
    area = SpoolArea(Path(root), quota=1 << 20)
    spool = area.open()
    spool.write(b"ciphertext of a stream")
    assert area.directory is not None
    ready.put((os.getpid(), area.directory.name))
    threading.Event().wait(120)
