"""The report's plots as SVG (``bench.svg``): units on both axes, which way is better, the spread
over rounds as a band or whisker, and a legend that names where the AES runs.

Every point drawn is an ``Estimate`` that a table prints too, from the same function (``Row.latency``,
``Row.mb``, ``Row.ops``, ``WorkloadRow.tps``): plots and tables cannot disagree. Log axes are used
only for lines across sizes, and say so in their label; fields per second by clients and the
workload's bars are on linear axes from zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench import seeds
from bench.clients import KMS_DIRECT_LIMIT, WHERE_AES_RUNS
from bench.estimate import Estimate
from bench.report import Row, human_size
from bench.svg import Axis, Chart, render

MIN_CONCURRENCY_LEVELS = 3
"""The concurrency plot is drawn only with this many levels or more (fewer make a dot, not a line)."""
SEED_NOTE = "the appliance is hardware on its network; SoftHSM here is in-process"


def legend_label(row: Row) -> str:
    """``km — AES in the HSM (CBC+HMAC)``."""
    return f"{row.first.target} — AES {WHERE_AES_RUNS.get(row.first.target, 'where its label says')}"


def add_lines(chart: Chart, rows: Sequence[Row], x: Callable[[Row], float], y: Callable[[Row], Estimate]) -> None:
    """One line per target: the mean over rounds, with a band from the lowest to the highest round."""
    series: dict[str, list[tuple[float, float, float, float]]] = {}
    for row in rows:
        figure = y(row)
        if figure.known:
            series.setdefault(legend_label(row), []).append((x(row), figure.mean, figure.low, figure.high))
    for label, points in series.items():
        chart.line(label, points)


def small_latency(rows: Sequence[Row]) -> bytes:
    """Mean encrypt latency per field against field size, one client; the seed's band; the 4 KiB switch."""
    sizes = sorted({float(r.first.size) for r in rows})
    x = Axis("field size (log scale)", log=True, ticks=sizes, text=lambda v: human_size(round(v)))
    chart = Chart("Small fields, one client: latency per field (lower is better)", x,
                  Axis("ms per encrypt of one field (mean, log scale)", log=True))  # fmt: skip
    low, high = seeds.SMALL.latency_ms
    chart.hspan(low, high, f"Townsend on-board appliance (seed): {low:g} to {high:g} ms ({SEED_NOTE})")
    add_lines(chart, rows, lambda r: r.first.size, lambda r: r.latency("encrypt"))
    if sizes and sizes[0] <= KMS_DIRECT_LIMIT <= sizes[-1]:
        chart.vline(
            KMS_DIRECT_LIMIT, "4 KiB: km-kms-api and aws-kms switch from Encrypt to envelope (data key + local AES)"
        )
    return render(chart).encode()


def concurrency(rows: Sequence[Row]) -> bytes:
    """Items per second against the number of clients, at one field size, on linear axes from zero."""
    levels = sorted({float(r.first.concurrency) for r in rows})
    size = rows[0].first.size if rows else 0
    y = Axis("fields encrypted or decrypted per second", zero=True)
    y.include(0.0)
    chart = Chart(f"Fields of {human_size(size)}: fields per second by clients (higher is better)",
                  Axis("concurrent clients", ticks=levels, text=lambda v: f"{v:g}"), y)  # fmt: skip
    add_lines(chart, rows, lambda r: r.first.concurrency, lambda r: r.ops)
    chart.hline(seeds.SMALL.ops_per_s, f"Townsend on-board appliance (seed): ~20 ops/s ({SEED_NOTE})")
    return render(chart).encode()


def large_throughput(rows: Sequence[Row]) -> bytes:
    """Encrypt MB/s against blob size, one client; the seed's 6.5 MB/s line."""
    sizes = sorted({r.first.size / 1e6 for r in rows})
    chart = Chart("Large blobs, one client: encryption throughput (higher is better)",
                  Axis("blob size (MB = 10^6 bytes, log scale)", log=True, ticks=sizes, text=lambda v: f"{v:g} MB"),
                  Axis("MB/s of plaintext encrypted (size ÷ mean encrypt time, log scale)", log=True))  # fmt: skip
    add_lines(chart, rows, lambda r: r.first.size / 1e6, lambda r: r.mb("encrypt"))
    chart.hline(seeds.LARGE.mb_per_s, f"Townsend on-board appliance (seed): ~6.5 MB/s ({SEED_NOTE})")
    return render(chart).encode()


def application(modes: Sequence[str], read: Sequence[Estimate], write: Sequence[Estimate]) -> bytes:
    """Transactions per second per way of storing the card number, reads and writes side by side, as
    bars from zero with a whisker from the lowest to the highest round."""
    chart = Chart("Customer workload on the database: transactions per second (higher is better)",
                  Axis("how the card number is stored"), Axis("transactions per second (linear, from zero)"),
                  groups=list(modes))  # fmt: skip
    chart.bars("read transactions (select, decrypt, check)", [(e.mean, e.low, e.high) for e in read])
    chart.bars("write transactions (encrypt, update)", [(e.mean, e.low, e.high) for e in write])
    return render(chart).encode()
