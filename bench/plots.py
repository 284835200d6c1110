"""The plots of ``blobs`` (SVG files beside ``blobs.json``), drawn as the report draws them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench import figures
from bench.clients import SMALL_LIMIT
from bench.report import Row


def lowest_concurrency(rows: Sequence[Row]) -> list[Row]:
    """Rows at each target's lowest concurrency (the latency a single client sees)."""
    low: dict[str, int] = {}
    for row in rows:
        low[row.first.target] = min(low.get(row.first.target, row.first.concurrency), row.first.concurrency)
    return [r for r in rows if r.first.concurrency == low[r.first.target]]


def plot_blobs(rows: Sequence[Row], out: Path) -> list[Path]:
    """Latency vs size (small), MB/s vs size (large), and ops/s vs clients when three or more levels
    were measured; the files written."""
    drawn = []
    small = [r for r in lowest_concurrency(rows) if r.first.size <= SMALL_LIMIT]
    large = [r for r in lowest_concurrency(rows) if r.first.size > SMALL_LIMIT]
    if small:
        drawn.append(("latency-small.svg", figures.small_latency(small)))
    if large:
        drawn.append(("throughput-large.svg", figures.large_throughput(large)))
    levels = {r.first.concurrency for r in rows}
    if rows and len(levels) >= figures.MIN_CONCURRENCY_LEVELS:
        smallest = min(r.first.size for r in rows)
        drawn.append(("ops-vs-concurrency.svg", figures.concurrency([r for r in rows if r.first.size == smallest])))
    made = []
    for name, svg in drawn:
        (out / name).write_bytes(svg)
        made.append(out / name)
    return made
