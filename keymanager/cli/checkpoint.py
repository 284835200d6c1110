"""Reading the ``--checkpoint`` argument of ``keymanager audit verify``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from keymanager.domain.checkpoint import MAX_LINE_CHARS, Checkpoint, latest_checkpoint


def read_checkpoint(argument: str) -> Checkpoint | None:
    """The latest checkpoint in the file ``argument`` names (a checkpoint file or a service log),
    or in ``argument`` itself when it names no file; None when there is none."""
    path = Path(argument)
    if path.is_file():
        return latest_checkpoint(_lines(path))
    return latest_checkpoint([argument])


def _lines(path: Path) -> Iterator[str]:
    """The file's lines, read in pieces of at most MAX_LINE_CHARS (a log may hold huge lines)."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        while piece := lines.readline(MAX_LINE_CHARS):
            yield piece
