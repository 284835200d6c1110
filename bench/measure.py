"""One measurement: a target, a blob size, a concurrency and a mode, with what it cost both sides."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.clients import TargetSpec
from bench.load import Job, LoadPool, Tally, start_time
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

    @property
    def operations(self) -> int:
        """Encryptions plus decryptions that succeeded."""
        return self.counted if self.counted is not None else len(self.encrypt) + len(self.decrypt)

    @property
    def error_count(self) -> int:
        """Failed operations and mismatching decryptions."""
        return sum(self.errors.values())

    @property
    def ops_per_s(self) -> float:
        """Items (fields or blobs) encrypted or decrypted per second."""
        return self.operations * self.items / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        """Plaintext megabytes (10⁶ bytes) encrypted or decrypted per second."""
        return self.ops_per_s * self.size / MB

    @property
    def server_cpu_us_per_request(self) -> float | None:
        """Service CPU (user + system, all its processes) per HTTP request, in microseconds."""
        if self.server_cpu_s is None or not self.operations:
            return None
        return self.server_cpu_s / self.operations * 1e6

    @property
    def client_cpu_pct(self) -> float:
        """The load generator's CPU use, in % of one core, over the window."""
        return self.client_cpu_s / self.elapsed * 100 if self.elapsed > 0 else 0.0

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
        raw = {k: v for k, v in self.__dict__.items() if k not in ("encrypt", "decrypt", "rss_peak")}
        return {
            **raw,
            "summary": self.summary(),
            "latencies_ms": {
                "encrypt": [round(x * 1e3, 3) for x in self.encrypt],
                "decrypt": [round(x * 1e3, 3) for x in self.decrypt],
            },
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
    """Run one measurement on the pool while probing the service's CPU and workers' RSS."""
    job = Job(target, size, concurrency, mode, start_time(), window.warmup, window.duration, window.requests)
    measure_start = job.start_at + job.warmup
    with RssSampler(probe.workers) as rss:
        future_tallies = pool.submit(job, concurrency)
        time.sleep(max(0.0, measure_start - time.time()))
        cpu_before = cpu_seconds(probe.pids()) if probe.known else None
        tallies = [f.result() for f in future_tallies]
        cpu_after = cpu_seconds(probe.pids()) if cpu_before is not None else None
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return Measurement(
        target=target.name,
        label=target.label,
        size=size,
        concurrency=concurrency,
        mode=mode,
        repeat=repeat,
        items=target_items(target),
        elapsed=max(total.last_end - measure_start, 1e-9),
        encrypt=total.encrypt,
        decrypt=total.decrypt,
        errors=dict(Counter(total.errors)),
        checked=total.checked,
        client_cpu_s=total.cpu_seconds,
        client_procs=len(tallies),
        server_cpu_s=None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
        rss_peak=dict(rss.peaks),
    )


def target_items(target: TargetSpec) -> int:
    """Fields per operation of a target."""
    return target.batch if target.name == "km-batch" else 1
