"""``python -m bench blobs``: small and large blob rates of every target, shaped like the appliance table."""

from __future__ import annotations

import argparse

from rich.console import Console

from bench import output
from bench.clients import SMALL_LIMIT
from bench.measure import Measurement, Window, measure
from bench.plots import plot_blobs
from bench.progress import steps
from bench.report import blob_document, human_size, print_blob_tables, rows_of
from bench.rig import Rig, rig
from bench.wrk import measure_wrk

SMALL_SIZES = (512, 1_000, 3_000, 5_000, 7_000, 10_000, 16_000)
LARGE_SIZES = (1, 2, 5, 7, 10, 15, 25, 50, 70)
LARGE_MAX_CONCURRENCY = 4
"""Large blobs are measured only at concurrencies up to this (each client holds three copies)."""

Step = tuple[str, int, int]


def default_sizes() -> list[int]:
    """512 B … 16 KB, then 1 MB … 70 MB."""
    return [*SMALL_SIZES, *(mb * 1_000_000 for mb in LARGE_SIZES)]


def plan(targets: list[str], sizes: list[int], concurrency: list[int]) -> list[Step]:
    """Every (target, size, concurrency) to measure, in order; batches only for small fields."""
    steps = []
    for target in targets:
        for size in sizes:
            if target == "km-batch" and size > SMALL_LIMIT:
                continue
            levels = concurrency if size <= SMALL_LIMIT else [c for c in concurrency if c <= LARGE_MAX_CONCURRENCY]
            steps += [(target, size, c) for c in levels or [1]]
    return steps


def measure_step(r: Rig, step: Step, window: Window, repeat: int, driver: str) -> Measurement:
    """Measure one step (encrypt then decrypt every iteration; wrk for the small ``km`` fields when asked)."""
    target, size, concurrency = step
    spec = r.target(target)
    if driver == "wrk" and target == "km" and size <= SMALL_LIMIT:
        assert r.endpoint is not None
        return measure_wrk(r.endpoint, spec.label, size, concurrency, window, r.probe, repeat)
    return measure(r.pool, spec, size, concurrency, "both", window, r.probe_of(target), repeat)


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure, print the tables, write JSON and plots to ``--out``; 1 when any operation failed."""
    planned = plan(args.targets, args.sizes, args.concurrency)
    window = Window(args.warmup, None if args.requests else args.duration, args.requests)
    measurements = []
    with rig(args, args.targets) as r, steps(console, len(planned) * args.repeat) as progress:
        environment = output.environment(args, r)
        for repeat in range(args.repeat):
            for step in planned:
                description = f"{step[0]} {human_size(step[1])} x{step[2]} (run {repeat + 1}/{args.repeat})"
                progress.starting(description)
                measured = measure_step(r, step, window, repeat, args.driver)
                measurements.append(measured)
                progress.finished(description, f"{measured.ops_per_s:,.1f} ops/s, {measured.error_count} errors")
    rows = rows_of(measurements)
    print_blob_tables(console, rows)
    out = output.directory(args)
    output.save(out / "blobs.json", blob_document(measurements, environment, command=output.command_line()))
    plots = plot_blobs(rows, out)
    console.print(f"results: {out / 'blobs.json'}; plots: {', '.join(p.name for p in plots)}")
    return 1 if any(m.error_count for m in measurements) else 0
