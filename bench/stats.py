"""Latency distributions: percentiles and summaries of what one measurement produced."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

PERCENTILES = (50.0, 90.0, 99.0)


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of already sorted values; NaN when there are none."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True)
class Distribution:
    """Summary of latencies in seconds: count, mean, p50, p90, p99 and max."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, latencies: Sequence[float]) -> Distribution:
        """Summarise ``latencies`` (seconds, any order)."""
        values = sorted(latencies)
        if not values:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = (percentile(values, p) for p in PERCENTILES)
        return cls(len(values), statistics.fmean(values), p50, p90, p99, values[-1])

    def as_ms(self) -> dict[str, float]:
        """The figures in milliseconds (count as is), for JSON."""
        return {
            "count": self.count,
            "mean_ms": self.mean * 1e3,
            "p50_ms": self.p50 * 1e3,
            "p90_ms": self.p90 * 1e3,
            "p99_ms": self.p99 * 1e3,
            "max_ms": self.max * 1e3,
        }


def spread(values: Sequence[float]) -> dict[str, float]:
    """Min, max, mean and relative standard deviation (%) of the figures of several repeats."""
    if not values:
        return {}
    mean = statistics.fmean(values)
    rsd = statistics.stdev(values) / mean * 100 if len(values) > 1 and mean else 0.0
    return {"min": min(values), "max": max(values), "mean": mean, "rsd_pct": rsd}


def redis_style_lines(latencies: Sequence[float]) -> list[str]:
    """Percentile lines as redis-benchmark prints them: ``50.000% <= 0.831 milliseconds``."""
    values = sorted(latencies)
    points = (0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0)
    lines = []
    for pct in points:
        value = values[0] if pct == 0 else percentile(values, pct)
        lines.append(f"{pct:7.3f}% <= {value * 1e3:.3f} milliseconds")
    return lines
