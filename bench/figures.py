"""The report's plots as PNG bytes (matplotlib, Agg): units on both axes, which way is better,
the spread over rounds as a band, and a legend that names where the AES runs.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from bench import seeds
from bench.clients import KMS_DIRECT_LIMIT, WHERE_AES_RUNS
from bench.measure import Measurement
from bench.report import Row, human_size

MIN_CONCURRENCY_LEVELS = 3
"""The concurrency plot is drawn only with this many levels or more (fewer make a dot, not a line)."""


def legend_label(row: Row) -> str:
    """``km — AES in the HSM (CBC+HMAC)``."""
    return f"{row.first.target} — AES {WHERE_AES_RUNS.get(row.first.target, 'where its label says')}"


def per_item_ms(m: Measurement) -> float:
    """Mean latency of one encrypt or decrypt of one item (a batch's divided by its fields), ms."""
    both = m.encrypt + m.decrypt
    return statistics.fmean(both) / m.items * 1e3 if both else float("nan")


def draw_bands(ax: Axes, rows: Sequence[Row], x: Callable[[Row], float], y: Callable[[Measurement], float]) -> None:
    """One line per target (mean over rounds) with a min-max band over the rounds."""
    series: dict[str, list[tuple[float, float, float, float]]] = {}
    for row in rows:
        values = [y(m) for m in row.runs]
        point = (x(row), statistics.fmean(values), min(values), max(values))
        series.setdefault(legend_label(row), []).append(point)
    for label, points in series.items():
        points.sort()
        xs = [p[0] for p in points]
        (line,) = ax.plot(xs, [p[1] for p in points], marker="o", label=label)
        ax.fill_between(xs, [p[2] for p in points], [p[3] for p in points], color=line.get_color(), alpha=0.18)


def plain_ticks(ax: Axes, xs: Sequence[float], x_text: Callable[[float], str]) -> None:
    """Ticks at the measured ``xs`` named by ``x_text``, and plain numbers (not powers of ten) on y."""
    ax.set_xticks(sorted(set(xs)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: x_text(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))


def finish(fig: Figure, ax: Axes) -> bytes:
    """Grid, legend under the axes, PNG bytes."""
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def small_latency(rows: Sequence[Row]) -> bytes:
    """Mean latency per item against field size, one client; the seed's 48-55 ms band; the 4 KiB switch."""
    fig, ax = plt.subplots(figsize=(9, 6.4))
    draw_bands(ax, rows, lambda r: r.first.size, per_item_ms)
    low, high = seeds.SMALL.latency_ms
    ax.axhspan(low, high, color="grey", alpha=0.25, label=f"Townsend on-board appliance (seed): {low:g}-{high:g} ms")
    switch = "4 KiB: km-kms-api and aws-kms switch from Encrypt to envelope (data key + local AES)"
    ax.axvline(KMS_DIRECT_LIMIT, color="black", linestyle="--", linewidth=1, label=switch)
    ax.set(xscale="log", yscale="log", xlabel="field size (log scale)")
    plain_ticks(ax, [r.first.size for r in rows], lambda v: human_size(round(v)))
    ax.set(ylabel="ms per encrypt or decrypt of one field (mean; log)")
    ax.set_title("Small fields, one client: latency per field (lower is better)")
    return finish(fig, ax)


def concurrency(rows: Sequence[Row]) -> bytes:
    """Items per second against the number of clients, at one field size."""
    fig, ax = plt.subplots(figsize=(9, 6.4))
    draw_bands(ax, rows, lambda r: r.first.concurrency, lambda m: m.ops_per_s)
    seed = "Townsend on-board appliance (seed): ~20 ops/s"
    ax.axhline(seeds.SMALL.ops_per_s, color="grey", linestyle=":", label=seed)
    ax.set(xscale="log", yscale="log", xlabel="concurrent clients (log scale)")
    plain_ticks(ax, [r.first.concurrency for r in rows], lambda v: f"{v:g}")
    ax.set(ylabel="fields encrypted or decrypted per second (log)")
    size = rows[0].first.size if rows else 0
    ax.set_title(f"Small fields of {size:,} B: fields per second by clients (higher is better)")
    return finish(fig, ax)


def large_throughput(rows: Sequence[Row]) -> bytes:
    """MB/s against blob size, one client; the seed's 6.5 MB/s line."""
    fig, ax = plt.subplots(figsize=(9, 6.4))
    draw_bands(ax, rows, lambda r: r.first.size / 1e6, lambda m: m.mb_per_s)
    ax.axhline(seeds.LARGE.mb_per_s, color="grey", linestyle=":", label="Townsend on-board appliance (seed): ~6.5 MB/s")
    ax.set(xscale="log", yscale="log", xlabel="blob size (MB = 10⁶ bytes, log scale)")
    plain_ticks(ax, [r.first.size / 1e6 for r in rows], lambda v: f"{v:g} MB")
    ax.set(ylabel="MB/s of plaintext, encrypt and decrypt (log)")
    ax.set_title("Large blobs, one client: throughput (higher is better)")
    return finish(fig, ax)


def application(modes: Sequence[str], read: Sequence[float], write: Sequence[float]) -> bytes:
    """Transactions per second per way of storing the card number, reads and writes side by side."""
    fig, ax = plt.subplots(figsize=(9, 5.6))
    positions = range(len(modes))
    ax.bar([p - 0.2 for p in positions], read, width=0.4, label="read transactions (select, decrypt, check)")
    ax.bar([p + 0.2 for p in positions], write, width=0.4, label="write transactions (encrypt, update)")
    ax.set_xticks(list(positions), list(modes), fontsize=8)
    ax.set(yscale="log", ylabel="transactions per second (log)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
    ax.set_title("Customer workload on the database: transactions per second (higher is better)")
    return finish(fig, ax)
