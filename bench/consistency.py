"""Throughput against latency: a check that every figure of a run agrees with the others.

With ``C`` clients each sending its next request as soon as the last one is answered, the rate
over a window in which all of them are measuring is ``C ÷ mean latency`` (Little's law; times
the fields per request for batches), the mean weighing each operation as the throughput counts
it (an operation across an edge of the window by its share inside). A measured throughput off
that by more than ``TOLERANCE`` means the clients were idle for part of the window — a client's
set-up, clients that had stopped, a load generator too busy to send — and such a figure
contradicts its own latencies.
``bench report`` prints the check for every row and fails the run when any round of any row
disagrees.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure import Measurement

TOLERANCE = 0.25
"""How far throughput may be from clients ÷ mean latency: ±25 %."""


def expected(clients: int, items: int, mean_latency: float) -> float:
    """``clients * items / mean latency`` (per second; the latency in seconds); NaN without one."""
    return clients * items / mean_latency if mean_latency > 0 else math.nan


def agreement(measured: float, clients: int, items: int, mean_latency: float) -> float:
    """Measured throughput ÷ the one the latency gives (1.0: they agree); NaN when it cannot be said."""
    wanted = expected(clients, items, mean_latency)
    return measured / wanted if wanted > 0 else math.nan


def agrees(ratio: float) -> bool:
    """True when a ratio of ``agreement`` is within ``TOLERANCE`` of 1."""
    return math.isfinite(ratio) and abs(ratio - 1) <= TOLERANCE


@dataclass(frozen=True)
class Check:
    """The check of one row: its name, its throughput and the throughput its latency gives (means
    over the rounds), and the ratio of each round."""

    name: str
    clients: int
    measured: float
    from_latency: float
    ratios: tuple[float, ...]

    @property
    def ok(self) -> bool:
        """True when every round agrees."""
        return bool(self.ratios) and all(agrees(r) for r in self.ratios)

    def ratio_text(self) -> str:
        """``0.98`` or ``0.96 to 1.03`` (lowest to highest round)."""
        low, high = f"{min(self.ratios):.2f}", f"{max(self.ratios):.2f}"
        return low if low == high else f"{low} to {high}"


def of_measurements(name: str, runs: Sequence[Measurement]) -> Check:
    """The check of a row of the Python driver's measurements (every latency kept)."""
    first = runs[0]
    ratios = tuple(agreement(m.ops_per_s, m.concurrency, m.items, m.window_latency) for m in runs)
    wanted = [expected(m.concurrency, m.items, m.window_latency) for m in runs]
    return Check(name, first.concurrency, statistics.fmean(m.ops_per_s for m in runs), statistics.fmean(wanted), ratios)


def failures(checks: Sequence[Check]) -> list[Check]:
    """The checks that fail."""
    return [c for c in checks if not c.ok]


def verdict(checks: Sequence[Check]) -> str:
    """One sentence: every row agrees, or which do not."""
    failed = failures(checks)
    if not failed:
        return (
            f"Every one of the {len(checks)} rows agrees with its latency: throughput within ±{TOLERANCE:.0%} of "
            "clients ÷ mean latency in every round."
        )
    named = "; ".join(f"{c.name} x{c.clients} ({c.ratio_text()})" for c in failed)
    return (
        f"THROUGHPUT CONTRADICTS LATENCY in {len(failed)} of {len(checks)} rows (more than ±{TOLERANCE:.0%} from "
        f"clients ÷ mean latency): {named}. Their figures are not valid measurements."
    )
