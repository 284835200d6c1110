"""The report's plots as SVG (``bench.svg``): units on both axes, which way is better, the spread over
rounds as a band, and a legend that names where the AES runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from bench import seeds
from bench.clients import KMS_DIRECT_LIMIT, WHERE_AES_RUNS
from bench.measure import Measurement
from bench.report import Row, human_size
from bench.svg import Axis, Chart, render

MIN_CONCURRENCY_LEVELS = 3
"""The concurrency plot is drawn only with this many levels or more (fewer make a dot, not a line)."""


def legend_label(row: Row) -> str:
    """``km — AES in the HSM (CBC+HMAC)``."""
    return f"{row.first.target} — AES {WHERE_AES_RUNS.get(row.first.target, 'where its label says')}"


def per_item_ms(m: Measurement) -> float:
    """Mean latency of one encrypt or decrypt of one item (a batch's divided by its fields), ms."""
    both = m.encrypt + m.decrypt
    return statistics.fmean(both) / m.items * 1e3 if both else float("nan")


def add_lines(chart: Chart, rows: Sequence[Row], x: Callable[[Row], float], y: Callable[[Measurement], float]) -> None:
    """One line per target: the mean over rounds, with a min-max band over the rounds."""
    series: dict[str, list[tuple[float, float, float, float]]] = {}
    for row in rows:
        values = [y(m) for m in row.runs]
        series.setdefault(legend_label(row), []).append((x(row), statistics.fmean(values), min(values), max(values)))
    for label, points in series.items():
        chart.line(label, points)


def small_latency(rows: Sequence[Row]) -> bytes:
    """Mean latency per item against field size, one client; the seed's 48-55 ms band; the 4 KiB switch."""
    sizes = sorted({float(r.first.size) for r in rows})
    x = Axis("field size (log scale)", log=True, ticks=sizes, text=lambda v: human_size(round(v)))
    chart = Chart("Small fields, one client: latency per field (lower is better)", x,
                  Axis("ms per encrypt or decrypt of one field (mean, log scale)", log=True))  # fmt: skip
    low, high = seeds.SMALL.latency_ms
    chart.hspan(low, high, f"Townsend on-board appliance (seed): {low:g} to {high:g} ms")
    add_lines(chart, rows, lambda r: r.first.size, per_item_ms)
    if sizes and sizes[0] <= KMS_DIRECT_LIMIT <= sizes[-1]:
        chart.vline(
            KMS_DIRECT_LIMIT, "4 KiB: km-kms-api and aws-kms switch from Encrypt to envelope (data key + local AES)"
        )
    return render(chart).encode()


def concurrency(rows: Sequence[Row]) -> bytes:
    """Items per second against the number of clients, at one field size."""
    levels = sorted({float(r.first.concurrency) for r in rows})
    size = rows[0].first.size if rows else 0
    chart = Chart(f"Fields of {human_size(size)}: fields per second by clients (higher is better)",
                  Axis("concurrent clients (log scale)", log=True, ticks=levels, text=lambda v: f"{v:g}"),
                  Axis("fields encrypted or decrypted per second (log scale)", log=True))  # fmt: skip
    add_lines(chart, rows, lambda r: r.first.concurrency, lambda m: m.ops_per_s)
    chart.hline(seeds.SMALL.ops_per_s, "Townsend on-board appliance (seed): ~20 ops/s")
    return render(chart).encode()


def large_throughput(rows: Sequence[Row]) -> bytes:
    """MB/s against blob size, one client; the seed's 6.5 MB/s line."""
    sizes = sorted({r.first.size / 1e6 for r in rows})
    chart = Chart("Large blobs, one client: throughput (higher is better)",
                  Axis("blob size (MB = 10^6 bytes, log scale)", log=True, ticks=sizes, text=lambda v: f"{v:g} MB"),
                  Axis("MB/s of plaintext, encrypt and decrypt (log scale)", log=True))  # fmt: skip
    add_lines(chart, rows, lambda r: r.first.size / 1e6, lambda m: m.mb_per_s)
    chart.hline(seeds.LARGE.mb_per_s, "Townsend on-board appliance (seed): ~6.5 MB/s")
    return render(chart).encode()


def application(modes: Sequence[str], read: Sequence[float], write: Sequence[float]) -> bytes:
    """Transactions per second per way of storing the card number, reads and writes side by side."""
    chart = Chart("Customer workload on the database: transactions per second (higher is better)",
                  Axis("how the card number is stored"), Axis("transactions per second (log scale)", log=True),
                  groups=list(modes))  # fmt: skip
    chart.bars("read transactions (select, decrypt, check)", read)
    chart.bars("write transactions (encrypt, update)", write)
    return render(chart).encode()
