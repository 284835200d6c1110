"""Checkpoints of the audit chain: a sequence number and its chain value, kept outside the database.

The service writes one to its log (and optionally to a file) periodically and at shutdown, as
one line ``audit checkpoint seq=<n> hash=<64 hex>``. Verifying the chain against a checkpoint
proves the database still holds every record up to it unchanged: records removed from the end
of the chain (with the head moved back to an earlier sealed record) are seen only this way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_LINE = re.compile(r"audit checkpoint seq=(\d{1,18}) hash=([0-9a-f]{64})(?![0-9a-f])")
MAX_LINE_CHARS = 4096
"""Longer lines of a log or checkpoint file are not read (a checkpoint line is about 110)."""


@dataclass(frozen=True)
class Checkpoint:
    """Record ``seq`` of the chain has the chain value ``hash``."""

    seq: int
    hash: str

    def line(self) -> str:
        """The one-line form, as written to the log and the checkpoint file."""
        return f"audit checkpoint seq={self.seq} hash={self.hash}"


def latest_checkpoint(lines: Iterable[str]) -> Checkpoint | None:
    """The checkpoint with the highest sequence number among ``lines`` (log lines or bare
    checkpoint lines, other lines ignored); None when there is none."""
    latest: Checkpoint | None = None
    for line in lines:
        for match in _LINE.finditer(line[:MAX_LINE_CHARS]):
            found = Checkpoint(int(match.group(1)), match.group(2))
            if latest is None or found.seq > latest.seq:
                latest = found
    return latest
