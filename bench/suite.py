"""``python -m bench report`` (what ``make bench`` runs): small blobs, large blobs and what encryption
costs an application, measured in one run and written as a report a security team can pass on.

Into ``--out`` (default ``bench-out/<time>/``): ``report.html`` (self-contained: tables, plots
inline, printable), ``report.md`` with its plots as SVG files, and ``report.json`` with every
sample. ``--quick`` measures a subset (fewer sizes, rounds and clients, shorter windows; about
three minutes on a 2-core machine) and says so at the top of the report; every run prints its
estimate before it starts. Every option left unset takes the full or the quick plan's value. The
run fails (exit 1) on any error and on any row whose throughput contradicts its latency
(``bench.consistency``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import OperationalError

from bench import app, document, findings, layout, output, workload
from bench.arguments import comma_list, parse_size
from bench.clients import SMALL_LIMIT
from bench.measure import Measurement, Window, measure
from bench.progress import Steps, steps
from bench.report import human_size, rows_of
from bench.rig import Rig, require_service, rig
from bench.tokenize import provision_tokens

SMALL_TARGETS = ("km", "km-gcm", "km-batch", "km-kms-api", "aws-kms")
LARGE_TARGETS = ("km", "km-envelope", "km-esdk")
APP_MODES = workload.MODES
DB_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
ASSUMED_MB_PER_S = {"km": 40.0, "km-envelope": 300.0, "km-esdk": 100.0}
"""Rates the estimate assumes for one large blob (a shared 2-core machine); only the estimate uses them."""
SETUP_S = 0.3
"""Seconds the estimate assumes for the clients' set-up of one measurement (their connections)."""


@dataclass(frozen=True)
class Plan:
    """What one report measures."""

    quick: bool
    small_sizes: tuple[int, ...]
    large_sizes: tuple[int, ...]
    concurrency: tuple[int, ...]
    rounds: int
    duration: float
    warmup: float
    app_clients: int
    app_duration: float
    app_rows: int
    app_fields: int = 10


FULL = Plan(
    quick=False,
    small_sizes=(512, 3_000, 5_000, 7_000, 10_000, 16_000),
    large_sizes=tuple(mb * 1_000_000 for mb in (1, 2, 5, 7, 10, 15, 25, 50, 70)),
    concurrency=(1, 8, 32),
    rounds=3,
    duration=2.0,
    warmup=0.5,
    app_clients=8,
    app_duration=5.0,
    app_rows=1000,
)
QUICK = Plan(
    quick=True,
    small_sizes=(512, 5_000, 16_000),
    large_sizes=(1_000_000, 10_000_000),
    concurrency=(1, 8),
    rounds=2,
    duration=0.3,
    warmup=0.05,
    app_clients=4,
    app_duration=1.0,
    app_rows=200,
)
OVERRIDES = ("small_sizes", "large_sizes", "concurrency", "rounds", "duration", "warmup", "app_clients",
             "app_duration", "app_rows")  # fmt: skip
"""Plan fields an option of the same name may set."""


def plan_of(args: argparse.Namespace) -> Plan:
    """The full or quick plan, with every option the user gave in its place."""
    base = QUICK if args.quick else FULL
    given = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    return replace(base, **{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})


Step = tuple[str, int, int]


def blob_steps(plan: Plan) -> list[Step]:
    """Every (target, size, clients) of one round: small fields at every concurrency, large blobs at one."""
    small = [(t, s, c) for t in SMALL_TARGETS for s in plan.small_sizes for c in plan.concurrency]
    return small + [(t, s, 1) for t in LARGE_TARGETS for s in plan.large_sizes]


def estimate_s(plan: Plan) -> float:
    """Seconds the plan should take: start-up, every measurement's window, the application workload."""
    per_step = 0.0
    for target, size, _ in blob_steps(plan):
        one_blob = 2 * size / 1e6 / ASSUMED_MB_PER_S.get(target, 1e9) if size > SMALL_LIMIT else 0.0
        per_step += SETUP_S + plan.warmup + max(plan.duration, one_blob) + 0.3
    populate = 2 * plan.app_rows / 1000  # batches of 500 rows per call, each mode each round
    windows = len(APP_MODES) * 2 * (plan.warmup + plan.app_duration + 0.2)
    return 20 + (per_step + windows + populate) * plan.rounds


PLAN_OPTIONS = (
    ("--small-sizes", "sizes", "field sizes"),
    ("--large-sizes", "sizes", "blob sizes"),
    ("--concurrency", "ints", "clients of the small-field measurements"),
    ("--rounds", "int", "rounds of every measurement (the plots' bands)"),
    ("--duration", "float", "seconds per measurement"),
    ("--warmup", "float", "warm-up seconds before each"),
    ("--app-clients", "int", "clients of the application workload"),
    ("--app-duration", "float", "seconds per workload window"),
    ("--app-rows", "int", "customers in the workload's table"),
)


def add_parser(commands: Any, service_options: argparse.ArgumentParser) -> None:
    """The ``report`` subcommand."""

    r = commands.add_parser("report", parents=[service_options], help="the full report: HTML, Markdown, JSON")
    r.add_argument("--quick", action="store_true", help="a subset in about 3 minutes, marked as such in the report")
    types: dict[str, Any] = {"sizes": comma_list(parse_size), "ints": comma_list(int), "int": int, "float": float}
    for option, kind, what in PLAN_OPTIONS:
        name = option[2:].replace("-", "_")
        default = shown(getattr(FULL, name), getattr(QUICK, name))
        r.add_argument(option, type=types[kind], help=f"{what} (default {default})")
    database = "PostgreSQL server of the workload: a scratch database there (SQLite when it does not answer)"
    r.add_argument("--db-server", default=DB_SERVER, help=database)
    r.add_argument("--client-procs", type=int, help="load processes (default: one per core, at least 2)")
    r.add_argument("--batch", type=int, default=100, help="fields per batch of km-batch")
    r.set_defaults(func=run, driver="python")


def shown(full: object, quick: object) -> str:
    """``full; --quick: quick`` for the help text."""

    def text(value: object) -> str:
        if isinstance(value, tuple) and value and isinstance(value[0], int) and value[0] >= 1000:
            return ",".join(human_size(v).replace(" ", "") for v in value)
        return ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)

    return f"{text(full)}; with --quick {text(quick)}"


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure the plan, write ``report.html``, ``report.md`` and ``report.json``; 1 on any error or on a
    row whose throughput contradicts its latency (``bench.consistency``)."""
    plan = plan_of(args)
    args.concurrency = list(plan.concurrency)
    require_service(args)
    out = output.directory(args)
    total = (len(blob_steps(plan)) + len(APP_MODES) * 2) * plan.rounds
    kind = "quick run (a subset, marked as such)" if plan.quick else "full run"
    console.print(f"report: {kind}, {total} measurements, estimated {estimate_s(plan) / 60:.1f} min; into {out}")
    started, load_before = time.time(), os.getloadavg()
    with rig(args, [*SMALL_TARGETS, *LARGE_TARGETS]) as r, steps(console, total) as progress:
        environment = output.environment(args, r)
        measurements = blob_measurements(r, plan, progress)
        workload, database = application(r, plan, args.db_server, out, progress)
    results = findings.Results(
        plan=asdict(plan),
        rows=rows_of(measurements),
        workload=workload,
        database=database,
        environment=environment,
        kms=r.aws,
        command=output.command_line(),
        started=started,
        seconds=time.time() - started,
        load_average=(load_before, os.getloadavg()),
    )
    report = layout.report(results)
    write(out, report, results, measurements)
    console.print("\n".join(results.summary))
    console.print(f"report: {out / 'report.html'} ({out / 'report.md'}, every sample in {out / 'report.json'})")
    return 1 if results.errors or results.contradictions else 0


def blob_measurements(r: Rig, plan: Plan, progress: Steps) -> list[Measurement]:
    """Every step of the plan, round after round (encrypt then decrypt and compare, every iteration)."""
    window = Window(plan.warmup, plan.duration, None)
    measurements = []
    for round_ in range(plan.rounds):
        for target, size, clients in blob_steps(plan):
            what = f"{target} {human_size(size)} x{clients} round {round_ + 1}/{plan.rounds}"
            progress.starting(what)
            spec = r.target(target)
            m = measure(r.pool, spec, size, clients, "both", window, r.probe_of(target), round_)
            measurements.append(m)
            progress.finished(what, f"{m.ops_per_s:,.1f} items/s, {m.mb_per_s:,.2f} MB/s, {m.error_count} errors")
    return measurements


@contextmanager
def workload_database(server: str, out: Path) -> Iterator[tuple[Engine, str]]:
    """A scratch PostgreSQL database on ``server``, else (not answering) a SQLite file in ``out``."""
    try:
        create_engine(server).connect().close()
    except OperationalError:
        engine = create_engine(f"sqlite:///{(out / 'app.db').resolve()}", connect_args={"timeout": 30})
        try:
            yield engine, f"SQLite (PostgreSQL at {server.split('@')[-1]} did not answer)"
        finally:
            engine.dispose()
        return
    with app.scratch_database(server) as url:
        engine = create_engine(url, pool_size=16)
        try:
            with engine.connect() as conn:
                version = conn.exec_driver_sql("SHOW server_version").scalar()
            yield engine, f"PostgreSQL {version}"
        finally:
            engine.dispose()


def application(r: Rig, plan: Plan, server: str, out: Path, progress: Steps) -> tuple[list[app.Tps], str]:
    """The customer workload in every mode of ``APP_MODES``, ``plan.rounds`` times (the modes
    interleaved: every mode once, then again); its results and the database's name."""
    assert r.service is not None and r.endpoint is not None
    tokens = provision_tokens(r.service)
    settings = argparse.Namespace(
        rows=plan.app_rows,
        fields=plan.app_fields,
        warmup=plan.warmup,
        duration=plan.app_duration,
        concurrency=[plan.app_clients],
    )
    results: list[app.Tps] = []
    with workload_database(server, out) as (engine, database):
        cpu = app.cpu_readers(engine, r.service)
        try:
            for round_ in range(plan.rounds):
                for mode in APP_MODES:
                    progress.starting(f"application workload: {mode} round {round_ + 1}/{plan.rounds}")
                    endpoint = tokens if mode == "token" else r.endpoint
                    done = app.run_mode(engine, endpoint, mode, settings, cpu, round_)
                    for tps in done:
                        what = f"application {mode} {tps.kind} x{tps.concurrency} round {round_ + 1}/{plan.rounds}"
                        progress.finished(what, f"{tps.tps:,.1f} tx/s")
                    results += done
        finally:
            app.metadata.drop_all(engine)
    return results, database


def write(out: Path, report: document.Report, results: findings.Results, measurements: list[Measurement]) -> None:
    """``report.html``, ``report.md`` (+ its SVG plots) and ``report.json`` (every sample) into ``out``."""
    (out / "report.html").write_text(document.html_page(report), encoding="utf-8")
    (out / "report.md").write_text(document.markdown(report, out), encoding="utf-8")
    body = {
        **results.as_json(),
        "rows": [row.as_json() for row in results.rows],
        "measurements": [m.as_json() for m in measurements],
        "workload": [t.as_json() for t in results.workload],
    }
    output.save(out / "report.json", body)
