"""Progress of a run of many measurements: a bar on a terminal, one plain line per measurement otherwise.

A run piped to a file or CI log must not stay silent for minutes: when stdout is not a terminal,
every measurement ends in a line ``[12/60 34 s] km 5 KB x8 round 1/2: 1,234 ops/s``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Steps:
    """Counts measurements done out of ``total`` and tells the user about each."""

    def __init__(self, console: Console, total: int, bar: Progress | None) -> None:
        self.console, self.total, self.bar = console, total, bar
        self.done = 0
        self.started = time.monotonic()

    def starting(self, what: str) -> None:
        """A measurement of ``what`` begins (shown on the bar)."""
        if self.bar is not None:
            self.bar.update(self.bar.task_ids[0], description=what)

    def finished(self, what: str, result: str) -> None:
        """A measurement of ``what`` ended with ``result`` (a line when not on a terminal)."""
        self.done += 1
        if self.bar is not None:
            self.bar.advance(self.bar.task_ids[0])
            return
        elapsed = time.monotonic() - self.started
        print(f"[{self.done}/{self.total} {elapsed:.0f} s] {what}: {result}", flush=True)


@contextmanager
def steps(console: Console, total: int, interactive: bool | None = None) -> Iterator[Steps]:
    """A ``Steps`` of ``total`` measurements: a rich bar when stdout is a terminal, lines otherwise."""
    if not (sys.stdout.isatty() if interactive is None else interactive):
        yield Steps(console, total, None)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        bar.add_task("measuring", total=total)
        yield Steps(console, total, bar)
