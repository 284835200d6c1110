"""Console tables (rich) and the JSON report of a run."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.clients import KMS_DIRECT_LIMIT
from bench.estimate import Estimate
from bench.measure import Measurement
from bench.stats import Distribution, spread

UNITS = ((1_000_000, "MB"), (1_000, "KB"))


def human_size(size: int) -> str:
    """``512 B``, ``16 KB``, ``70 MB`` (decimal units, as the sizes are given)."""
    for factor, unit in UNITS:
        if size >= factor:
            value = size / factor
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} B"


def size_text(row: Row) -> str:
    """``5 KB (envelope)`` for the KMS targets above 4 KiB, ``512 B (direct)`` below, else the size."""
    switch = row.first.target in ("km-kms-api", "aws-kms")
    suffix = (" (envelope)" if row.first.size > KMS_DIRECT_LIMIT else " (direct)") if switch else ""
    return human_size(row.first.size) + suffix


def latency_ms(m: Measurement, which: str) -> float:
    """Mean latency of one item's ``which`` (``encrypt``, ``decrypt``, ``all``) in one round, ms (a
    batch's latency divided by its fields); NaN when there was none."""
    values = m.encrypt if which == "encrypt" else m.decrypt if which == "decrypt" else m.encrypt + m.decrypt
    return statistics.fmean(values) / m.items * 1e3 if values else math.nan


def mb_per_s(m: Measurement, which: str) -> float:
    """Plaintext MB/s of one client doing only ``which`` in one round (size over its mean latency)."""
    values = m.encrypt if which == "encrypt" else m.decrypt
    return m.size * m.items / 1e6 / statistics.fmean(values) if values else math.nan


@dataclass
class Row:
    """The repeats (rounds) of one (target, size, concurrency, mode), aggregated. Every figure a
    table prints or a plot draws of it is an ``Estimate`` over the rounds, from the functions here."""

    runs: list[Measurement]

    @property
    def first(self) -> Measurement:
        return self.runs[0]

    @property
    def ops(self) -> Estimate:
        """Items per second, per round."""
        return Estimate.of(m.ops_per_s for m in self.runs)

    def latency(self, which: str) -> Estimate:
        """Mean latency per item (ms) of ``which``, per round."""
        return Estimate.of(latency_ms(m, which) for m in self.runs)

    def mb(self, which: str) -> Estimate:
        """MB/s of one client doing only ``which``, per round."""
        return Estimate.of(mb_per_s(m, which) for m in self.runs)

    @property
    def unstable(self) -> bool:
        """True when the rounds' items per second disagree (``bench.estimate.UNSTABLE``)."""
        return self.ops.unstable

    @property
    def ops_per_s(self) -> float:
        """Mean items per second over the repeats."""
        return statistics.fmean(m.ops_per_s for m in self.runs)

    @property
    def mb_per_s(self) -> float:
        """Mean plaintext MB per second over the repeats."""
        return statistics.fmean(m.mb_per_s for m in self.runs)

    @property
    def errors(self) -> int:
        """Errors of every repeat."""
        return sum(m.error_count for m in self.runs)

    def latencies(self, which: str) -> Distribution:
        """Pooled latencies of ``which`` (``encrypt``, ``decrypt`` or ``all``) over the repeats."""
        values: list[float] = []
        for m in self.runs:
            values += m.encrypt if which == "encrypt" else m.decrypt if which == "decrypt" else m.encrypt + m.decrypt
        return Distribution.of(values)

    def mean_of(self, values: Iterable[float | None]) -> float | None:
        """Mean of the figures that are known."""
        known = [v for v in values if v is not None]
        return statistics.fmean(known) if known else None

    def as_json(self) -> dict[str, Any]:
        """Aggregated figures, with the spread of ops/s across repeats."""
        m = self.first
        return {
            "target": m.target,
            "label": m.label,
            "size": m.size,
            "concurrency": m.concurrency,
            "mode": m.mode,
            "repeats": len(self.runs),
            "ops_per_s": self.ops_per_s,
            "ops_per_s_spread": spread([r.ops_per_s for r in self.runs]),
            "unstable": self.unstable,
            "mb_per_s": self.mb_per_s,
            "encrypt": self.latencies("encrypt").as_ms(),
            "decrypt": self.latencies("decrypt").as_ms(),
            "all": self.latencies("all").as_ms(),
            "errors": self.errors,
            "server_cpu_us_per_request": self.mean_of(r.server_cpu_us_per_request for r in self.runs),
            "client_cpu_pct_of_one_core": self.mean_of(r.client_cpu_pct for r in self.runs),
        }


def rows_of(measurements: Sequence[Measurement]) -> list[Row]:
    """Group repeats; rows in the order measurements were made."""
    groups: dict[tuple[str, int, int, str], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.target, m.size, m.concurrency, m.mode), []).append(m)
    return [Row(runs) for runs in groups.values()]


def ms(value: float) -> str:
    """Milliseconds with sensible precision."""
    return "—" if value != value else f"{value * 1e3:.2f}" if value < 10 else f"{value * 1e3:.0f}"


def blob_table(rows: Sequence[Row], title: str) -> Table:
    """A table shaped like the published appliance table, one row per size and concurrency."""
    table = Table(title=title, title_justify="left")
    for column in ("size", "conc", "encrypt avg ms", "decrypt avg ms", "ops/s", "MB/s", "p50/p90/p99/max ms"):
        table.add_column(column, justify="right")
    for column in ("spread", "svc CPU µs/req", "client CPU %", "errors"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*blob_cells(row))
    return table


def blob_cells(row: Row) -> list[str]:
    """The cells of one table row."""
    both = row.latencies("all")
    spread_figures = spread([r.ops_per_s for r in row.runs])
    cpu = row.mean_of(r.server_cpu_us_per_request for r in row.runs)
    client = row.mean_of(r.client_cpu_pct for r in row.runs)
    batch = f" ({row.first.items}/op)" if row.first.items > 1 else ""
    return [
        human_size(row.first.size) + batch,
        str(row.first.concurrency),
        ms(row.latencies("encrypt").mean),
        ms(row.latencies("decrypt").mean),
        f"{row.ops_per_s:,.1f}",
        f"{row.mb_per_s:,.2f}",
        "/".join(ms(v) for v in (both.p50, both.p90, both.p99, both.max)),
        f"±{spread_figures['rsd_pct']:.1f}%{' unstable' if row.unstable else ''}" if len(row.runs) > 1 else "—",
        "—" if cpu is None else f"{cpu:,.0f}",
        "—" if client is None else f"{client:.0f}",
        f"[bold red]{row.errors}[/]" if row.errors else "0",
    ]


def print_blob_tables(console: Console, rows: Sequence[Row]) -> None:
    """One table per target; a loud line when any measurement had errors."""
    for target in dict.fromkeys(r.first.target for r in rows):
        mine = [r for r in rows if r.first.target == target]
        console.print(blob_table(mine, mine[0].first.label))
    errors = sum(r.errors for r in rows)
    if errors:
        console.print(f"[bold red]THIS RUN HAD {errors} ERRORS: its figures are not valid measurements.[/]")


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write the report (indented, UTF-8)."""
    path.write_text(json.dumps(document, indent=1, default=str, ensure_ascii=False) + "\n")


def blob_document(measurements: Sequence[Measurement], environment: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The JSON of a blobs run: every raw figure, the aggregated rows, the environment."""
    errors = sum(m.error_count for m in measurements)
    return {
        "ok": errors == 0,
        "errors_total": errors,
        "environment": environment,
        **extra,
        "rows": [row.as_json() for row in rows_of(measurements)],
        "measurements": [m.as_json() for m in measurements],
    }
