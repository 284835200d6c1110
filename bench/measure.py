"""One measurement: a target, a blob size, a concurrency and a mode, with what it cost both sides.

Its throughput is counted over **the window in which every client was measuring**: from the
moment the last client sent its first measured request (after its set-up and warm-up) to the
moment the first client got its last answer. An operation inside the window counts whole; one
that straddles an edge counts for the share of its time inside. So the window never holds a
client's set-up or the tail in which some clients have stopped, and with ``C`` clients always
busy the throughput is ``C ÷ mean latency`` (Little's law), the mean weighing each operation as
the throughput counts it: ``bench.consistency`` checks that it is. The latencies kept are those of
the operations counted, with their shares.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.clients import TargetSpec
from bench.load import SETUP_DEADLINE, Job, LoadPool, Span, Tally
from bench.probes import RssSampler, ServerProbe, cpu_seconds
from bench.stats import Distribution

MB = 1_000_000


@dataclass(frozen=True)
class Window:
    """How long to measure: warm-up seconds, then ``duration`` seconds or ``requests`` operations."""

    warmup: float = 1.0
    duration: float | None = 5.0
    requests: int | None = None


@dataclass
class Measurement:
    """The raw figures of one measurement and what follows from them.

    An *operation* is one encryption or one decryption of a payload; ``items`` fields per
    operation (a batch for ``km-batch``). ``ops_per_s`` counts items, ``mb_per_s`` plaintext bytes.
    """

    target: str
    label: str
    size: int
    concurrency: int
    mode: str
    repeat: int
    items: int
    elapsed: float
    encrypt: list[float]
    decrypt: list[float]
    errors: dict[str, int]
    checked: int
    client_cpu_s: float
    client_procs: int
    server_cpu_s: float | None
    rss_peak: dict[int, int] = field(default_factory=dict)
    driver: str = "python"
    counted: int | None = None
    """Operations counted by the driver when the latencies are quantiles rather than every one (wrk)."""
    shares: list[float] | None = None
    """The Python driver: per operation kept (the encryptions, then the decryptions), the share of it
    inside the window — 1 inside, less across an edge."""
    probed_s: float | None = None
    """Wall seconds over which the CPU figures were read (the Python driver: warm-up end to last answer)."""
    probed_operations: int | None = None
    """Operations made while the CPU figures were read (the Python driver: every measured one)."""
    setup_s: float | None = None
    """The longest client set-up (opening its connection), seconds: kept out of the window."""

    @property
    def operations(self) -> int:
        """Encryptions plus decryptions that succeeded (and were counted)."""
        return self.counted if self.counted is not None else len(self.encrypt) + len(self.decrypt)

    @property
    def error_count(self) -> int:
        """Failed operations and mismatching decryptions."""
        return sum(self.errors.values())

    @property
    def in_window(self) -> float | None:
        """Operations in the window, those across an edge by their share (None: not the Python driver)."""
        return sum(self.shares) if self.shares is not None else None

    @property
    def window_latency(self) -> float:
        """Mean latency (seconds) of the work in the window: each operation weighted by its share inside,
        as the throughput counts it (every operation alike without shares); NaN without operations."""
        latencies = self.encrypt + self.decrypt
        return weighted_mean(latencies, self.shares if self.shares is not None else [1.0] * len(latencies))

    @property
    def ops_per_s(self) -> float:
        """Items (fields or blobs) encrypted or decrypted per second over the window."""
        done = self.in_window if self.in_window is not None else self.operations
        return done * self.items / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        """Plaintext megabytes (10⁶ bytes) encrypted or decrypted per second."""
        return self.ops_per_s * self.size / MB

    @property
    def server_cpu_us_per_request(self) -> float | None:
        """Service CPU (user + system, all its processes) per HTTP request, in microseconds."""
        operations = self.probed_operations if self.probed_operations is not None else self.operations
        if self.server_cpu_s is None or not operations:
            return None
        return self.server_cpu_s / operations * 1e6

    @property
    def client_cpu_pct(self) -> float:
        """The load generator's CPU use, in % of one core, over the time its CPU was read."""
        seconds = self.probed_s if self.probed_s is not None else self.elapsed
        return self.client_cpu_s / seconds * 100 if seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """Every derived figure, for the JSON report and the tables."""
        both = self.encrypt + self.decrypt
        return {
            "operations": self.operations,
            "ops_per_s": self.ops_per_s,
            "mb_per_s": self.mb_per_s,
            "encrypt": Distribution.of(self.encrypt).as_ms(),
            "decrypt": Distribution.of(self.decrypt).as_ms(),
            "all": Distribution.of(both).as_ms(),
            "error_count": self.error_count,
            "server_cpu_us_per_request": self.server_cpu_us_per_request,
            "client_cpu_pct_of_one_core": self.client_cpu_pct,
            "rss_peak_mb_per_worker": {str(pid): rss / MB for pid, rss in self.rss_peak.items()},
        }

    def as_json(self) -> dict[str, Any]:
        """Raw figures (latencies in ms, rounded to the µs) and the summary."""
        raw = {k: v for k, v in self.__dict__.items() if k not in ("encrypt", "decrypt", "rss_peak", "shares")}
        return {
            **raw,
            "summary": self.summary(),
            "latencies_ms": {
                "encrypt": [round(x * 1e3, 3) for x in self.encrypt],
                "decrypt": [round(x * 1e3, 3) for x in self.decrypt],
            },
            "shares_in_window": None if self.shares is None else [round(x, 4) for x in self.shares],
        }


def measure(
    pool: LoadPool,
    target: TargetSpec,
    size: int,
    concurrency: int,
    mode: str,
    window: Window,
    probe: ServerProbe,
    repeat: int = 0,
) -> Measurement:
    """Run one measurement on the pool while probing the service's CPU (from the end of the warm-up
    to the last answer) and workers' RSS."""
    job = Job(target, size, concurrency, mode, window.warmup, window.duration, window.requests)
    with RssSampler(probe.workers) as rss:
        barrier, future_tallies = pool.submit(job, concurrency)
        try:
            barrier.wait(SETUP_DEADLINE)  # every client has set up
            barrier.wait(SETUP_DEADLINE + window.warmup)  # and warmed up
        except threading.BrokenBarrierError:
            pass  # a client could not: its error is in its tally
        probed = time.monotonic()
        cpu_before = cpu_seconds(probe.pids()) if probe.known else None
        tallies = [f.result() for f in future_tallies]
        cpu_after = cpu_seconds(probe.pids()) if cpu_before is not None else None
        probed = time.monotonic() - probed
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    start, end = common_window(total.clients)
    encrypt, decrypt = inside(total.encrypt, start, end), inside(total.decrypt, start, end)
    return Measurement(
        target=target.name,
        label=target.label,
        size=size,
        concurrency=concurrency,
        mode=mode,
        repeat=repeat,
        items=target_items(target),
        elapsed=max(end - start, 1e-9),
        encrypt=[e - s for s, e in encrypt],
        decrypt=[e - s for s, e in decrypt],
        errors=dict(Counter(total.errors)),
        checked=total.checked,
        client_cpu_s=total.cpu_seconds,
        client_procs=len(tallies),
        server_cpu_s=None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
        rss_peak=dict(rss.peaks),
        shares=shares_inside(encrypt + decrypt, start, end),
        probed_s=probed,
        probed_operations=len(total.encrypt) + len(total.decrypt),
        setup_s=total.setup_s,
    )


def common_window(clients: Sequence[Span]) -> Span:
    """The span in which every client was measuring: the latest first start to the earliest last end.
    When the clients' spans do not overlap (or none measured), the span of them all, so that the
    figures show the clients' disagreement instead of dividing by nothing."""
    if not clients:
        return 0.0, 0.0
    start, end = max(s for s, _ in clients), min(e for _, e in clients)
    if end > start:
        return start, end
    return min(s for s, _ in clients), max(e for _, e in clients)


def inside(spans: Sequence[Span], start: float, end: float) -> list[Span]:
    """The operations that overlap the window (those counted, wholly or in part)."""
    return [(s, e) for s, e in spans if e > start and s < end]


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    """The mean of ``values`` weighted by ``weights`` (NaN when they weigh nothing)."""
    total = sum(weights)
    return sum(w * x for w, x in zip(weights, values, strict=True)) / total if total > 0 else math.nan


def shares_inside(spans: Sequence[Span], start: float, end: float) -> list[float]:
    """Per operation, the share of it inside the window: 1 inside, less across an edge, 0 outside."""
    return [max(0.0, min(e, end) - max(s, start)) / (e - s) if e > s else 1.0 for s, e in spans]


def target_items(target: TargetSpec) -> int:
    """Fields per operation of a target."""
    return target.batch if target.name == "km-batch" else 1
