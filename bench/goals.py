"""``python -m bench targets``: exactly the measurements the performance targets name, and a verdict.

| target | measured as |
|---|---|
| ≥ 3,000 ops/s | 1 KB encrypt (and decrypt), 32 connections, ``km`` |
| ≤ 400 µs CPU/request | service CPU (user + system of all its processes) / requests, same run |
| p50 ≤ 1.5 ms, p99 ≤ 4 ms | 1 KB encrypt, one sequential client |
| ≥ 30,000 items/s | ``km-batch``: batches of 100 x 1 KB, encrypt, 8 connections |
| ≥ 200 MB/s on board | ``km`` on-board stream of 70 MB, encrypt and decrypt, one client |
| ≥ 1 GB/s envelope | ``km-envelope`` of 70 MB, encrypt and decrypt, one client |
| ≥ 10x emulator | the first line's ops/s over the AWS KMS API emulator's, same load |
| RSS ≤ 150 MB per worker | peak resident set of each service worker during the 70 MB stream |
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import output
from bench.measure import MB, Measurement, Window, measure
from bench.report import human_size, write_json
from bench.rig import Rig, rig
from bench.stats import Distribution
from bench.wrk import measure_wrk

BATCH_CONCURRENCY = 8


@dataclass(frozen=True)
class Goal:
    """One target: its name, the figure measured, the bound and whether higher is better."""

    name: str
    measured: float | None
    bound: float
    unit: str
    higher_is_better: bool = True

    @property
    def met(self) -> bool | None:
        """True or False; None when the figure could not be measured."""
        if self.measured is None:
            return None
        return self.measured >= self.bound if self.higher_is_better else self.measured <= self.bound

    def as_json(self) -> dict[str, Any]:
        """For the report."""
        return {**self.__dict__, "met": self.met}


def field_run(r: Rig, args: argparse.Namespace, target: str, mode: str, concurrency: int) -> Measurement:
    """A small-field measurement (wrk for ``km`` when ``--driver wrk`` and more than one connection)."""
    window = Window(args.warmup, None if args.requests else args.duration, args.requests)
    if args.driver == "wrk" and target == "km" and concurrency > 1:
        assert r.endpoint is not None
        label = r.target(target).label
        return measure_wrk(r.endpoint, label, args.field_size, concurrency, window, r.probe, mode=mode)
    return measure(r.pool, r.target(target), args.field_size, concurrency, mode, window, r.probe_of(target))


def stream_run(r: Rig, args: argparse.Namespace, target: str) -> Measurement:
    """One client streaming ``--stream-size`` blobs (encrypt, then decrypt and compare)."""
    window = Window(0.0, None if args.requests else args.duration, args.requests)
    return measure(r.pool, r.target(target), args.stream_size, 1, "both", window, r.probe)


def mb_per_s(size: int, latencies: list[float]) -> float | None:
    """Throughput of one direction from its mean latency."""
    mean = Distribution.of(latencies).mean
    return size / mean / MB if latencies else None


def measurements(r: Rig, args: argparse.Namespace, step: Callable[[str], None]) -> dict[str, Measurement]:
    """Every measurement the targets need, named."""
    high = args.high_concurrency
    plan: dict[str, Callable[[], Measurement]] = {
        "encrypt_high": lambda: field_run(r, args, "km", "encrypt", high),
        "decrypt_high": lambda: field_run(r, args, "km", "decrypt", high),
        "encrypt_sequential": lambda: field_run(r, args, "km", "encrypt", 1),
        "batch": lambda: field_run(r, args, "km-batch", "encrypt", BATCH_CONCURRENCY),
        "stream": lambda: stream_run(r, args, "km"),
        "envelope": lambda: stream_run(r, args, "km-envelope"),
        "emulator_high": lambda: field_run(r, args, "aws-kms", "encrypt", high),
    }
    done = {}
    for name, run_one in plan.items():
        step(name)
        done[name] = run_one()
    return done


def goals_of(m: dict[str, Measurement], size: int) -> list[Goal]:
    """The verdicts, from the named measurements."""
    seq = Distribution.of(m["encrypt_sequential"].encrypt)
    stream, envelope = m["stream"], m["envelope"]
    ratio = m["encrypt_high"].ops_per_s / m["emulator_high"].ops_per_s if m["emulator_high"].ops_per_s else None
    rss = max(stream.rss_peak.values(), default=None)
    return [
        Goal("1 KB encrypt x32 ops/s", m["encrypt_high"].ops_per_s, 3000, "ops/s"),
        Goal("1 KB decrypt x32 ops/s", m["decrypt_high"].ops_per_s, 3000, "ops/s"),
        Goal("service CPU per request", m["encrypt_high"].server_cpu_us_per_request, 400, "µs", False),
        Goal("sequential encrypt p50", seq.p50 * 1e3, 1.5, "ms", False),
        Goal("sequential encrypt p99", seq.p99 * 1e3, 4.0, "ms", False),
        Goal("batches of 100 x 1 KB", m["batch"].ops_per_s, 30_000, "items/s"),
        Goal(f"on-board stream {human_size(size)} encrypt", mb_per_s(size, stream.encrypt), 200, "MB/s"),
        Goal(f"on-board stream {human_size(size)} decrypt", mb_per_s(size, stream.decrypt), 200, "MB/s"),
        Goal(f"envelope {human_size(size)} encrypt", mb_per_s(size, envelope.encrypt), 1000, "MB/s"),
        Goal(f"envelope {human_size(size)} decrypt", mb_per_s(size, envelope.decrypt), 1000, "MB/s"),
        Goal("ops/s over the emulator's", ratio, 10, "x"),
        Goal("peak RSS per worker (stream)", None if rss is None else rss / MB, 150, "MB", False),
    ]


def goals_table(goals: list[Goal], errors: int) -> Table:
    """The targets summary block."""
    title = "targets" + (f" — [bold red]{errors} ERRORS: not valid[/]" if errors else "")
    table = Table(title=title, title_justify="left")
    for column in ("target", "measured", "goal", "met"):
        table.add_column(column, justify="right" if column != "target" else "left")
    for g in goals:
        measured = "—" if g.measured is None else f"{g.measured:,.2f} {g.unit}"
        bound = f"{'≥' if g.higher_is_better else '≤'} {g.bound:,g} {g.unit}"
        verdict = {True: "[green]yes[/]", False: "[red]no[/]", None: "?"}[g.met]
        table.add_row(g.name, measured, bound, verdict)
    return table


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure, print the targets block, write ``targets.json``; 1 on errors."""
    args.concurrency = [1, args.high_concurrency]
    with rig(args, ["km", "km-batch", "km-envelope", "aws-kms"]) as r:
        environment = output.environment(args, r)
        with console.status("measuring") as status:
            done = measurements(r, args, lambda name: status.update(f"measuring {name}"))
    goals = goals_of(done, args.stream_size)
    errors = sum(m.error_count for m in done.values())
    console.print(goals_table(goals, errors))
    out = output.directory(args)
    document = {
        "ok": errors == 0,
        "errors_total": errors,
        "environment": environment,
        "command": output.command_line(),
        "targets": [g.as_json() for g in goals],
        "measurements": {name: m.as_json() for name, m in done.items()},
    }
    write_json(out / "targets.json", document)
    console.print(f"results: {out / 'targets.json'}")
    return 1 if errors else 0
