"""PNG plots (matplotlib, Agg backend): every target on the same axes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.clients import SMALL_LIMIT
from bench.report import Row


def _series(
    rows: Sequence[Row], x: Callable[[Row], float], y: Callable[[Row], float]
) -> dict[str, list[tuple[float, float]]]:
    """Points per target label, sorted by x."""
    series: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        series.setdefault(row.first.label, []).append((x(row), y(row)))
    return {label: sorted(points) for label, points in series.items()}


def _save(
    path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, list[tuple[float, float]]], logx: bool
) -> Path:
    """Draw the series as lines with markers and save the PNG."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for label, points in series.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def lowest_concurrency(rows: Sequence[Row]) -> list[Row]:
    """Rows at each target's lowest concurrency (the latency a single client sees)."""
    low: dict[str, int] = {}
    for row in rows:
        low[row.first.target] = min(low.get(row.first.target, row.first.concurrency), row.first.concurrency)
    return [r for r in rows if r.first.concurrency == low[r.first.target]]


def plot_blobs(rows: Sequence[Row], out: Path) -> list[Path]:
    """Latency vs size (small), MB/s vs size (large), ops/s vs concurrency (smallest size); the files."""
    made = []
    small = [r for r in lowest_concurrency(rows) if r.first.size <= SMALL_LIMIT]
    large = [r for r in lowest_concurrency(rows) if r.first.size > SMALL_LIMIT]
    if small:
        points = _series(small, lambda r: r.first.size, lambda r: r.latencies("all").mean * 1e3)
        made.append(_save(out / "latency-small.png", "Small blobs: mean latency", "bytes", "ms", points, True))
    if large:
        points = _series(large, lambda r: r.first.size / 1e6, lambda r: r.mb_per_s)
        made.append(_save(out / "throughput-large.png", "Large blobs: throughput", "MB", "MB/s", points, True))
    if rows:
        smallest = min(r.first.size for r in rows)
        at = [r for r in rows if r.first.size == smallest]
        points = _series(at, lambda r: r.first.concurrency, lambda r: r.ops_per_s)
        title = f"ops/s vs concurrency ({smallest} B)"
        made.append(_save(out / "ops-vs-concurrency.png", title, "concurrent clients", "ops/s", points, True))
    return made
