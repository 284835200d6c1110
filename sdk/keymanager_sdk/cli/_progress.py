"""A progress bar on stderr while kmctl reads a large input (rich, from the ``cli`` extra)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from keymanager_sdk.cli._config import UsageError

AUTO_MIN_SIZE = 16_000_000
"""With neither ``--progress`` nor ``--no-progress``: a bar for inputs of this size or more, on a terminal."""


def wanted(size: int | None, forced: bool | None) -> bool:
    """Whether to show a bar for an input of ``size`` bytes (None: unknown, e.g. a pipe)."""
    if forced is not None:
        return forced
    return size is not None and size >= AUTO_MIN_SIZE and sys.stderr.isatty()


class _Counted:
    """A binary input whose reads advance a progress task (kmctl's readers only call ``read``)."""

    def __init__(self, src: BinaryIO, advance: Callable[[int], None]) -> None:
        self._src = src
        self._advance = advance

    def read(self, size: int = -1) -> bytes:
        data = self._src.read(size)
        self._advance(len(data))
        return data


@contextmanager
def reading(src: BinaryIO, size: int | None, verb: str, forced: bool | None) -> Iterator[BinaryIO]:
    """``src``, or ``src`` wrapped so that reading it advances a bar (``size`` bytes in all, None:
    unknown) on stderr. ``--progress`` without rich installed is a ``UsageError``; the automatic
    bar is then left out."""
    if not wanted(size, forced):
        yield src
        return
    try:
        from rich import progress as bars
        from rich.console import Console
    except ImportError as exc:
        if forced:
            raise UsageError("--progress needs rich: pip install 'keymanager-sdk[cli]'") from exc
        yield src
        return
    columns = (
        bars.TextColumn(f"{verb}ing"),
        bars.BarColumn(),
        bars.DownloadColumn(),
        bars.TransferSpeedColumn(),
        bars.TimeRemainingColumn(),
    )
    with bars.Progress(*columns, console=Console(stderr=True)) as progress:
        task = progress.add_task(verb, total=size)
        yield _Counted(src, lambda n: progress.advance(task, n))  # type: ignore[misc]
