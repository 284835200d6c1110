"""``python -m bench fastpath``: what the fast path (``KM_FAST_PATH``) saves, on vs off in one run.

One installation, served in turn with ``KM_FAST_PATH=true`` and ``false`` (on, off, on, off …,
``--rounds`` times), each time a fresh ``--workers``-process server. Against each, wrk posts the
1 KB encrypt JSON with a bearer token at ``--connections`` connections: ``--warmup`` seconds,
then ``--duration`` seconds measured. The figures per run: requests/s, and the service's CPU
time (user + system of the server's processes, read before and after) per request. The load
average is printed beside each run: on a shared machine it says how far to trust the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import wrk
from bench.environment import describe
from bench.output import command_line, directory, save
from bench.probes import cpu_seconds
from bench.service import Endpoint, Service, init_home, provision, serve

FIELD_BYTES = 1_000


def measure_one(
    home: Path, var_dir: Path, pin: str, settings: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    """One fresh server of ``home`` with ``settings`` (``KM_*``): warm-up, then one measured wrk run
    of the 1 KB encrypt at ``args.connections``."""
    with serve(home, var_dir, pin, args.workers, settings=settings) as service:
        return encrypt_run(service, provision(service), args)


def encrypt_run(service: Service, endpoint: Endpoint, args: argparse.Namespace) -> dict[str, Any]:
    """wrk posting the 1 KB encrypt of ``endpoint`` at ``args.connections``: ``args.warmup`` seconds,
    then ``args.duration`` measured; requests/s, the service's CPU per request, p50, the load average."""
    with tempfile.TemporaryDirectory() as tmp:
        lua = Path(tmp) / "encrypt.lua"
        lua.write_text(wrk.script(endpoint, FIELD_BYTES, decrypt=False))
        wrk.run_wrk(service.url, lua, args.connections, args.warmup)
        load_before = os.getloadavg()[0]
        before = cpu_seconds(service.pids())
        stdout = wrk.run_wrk(service.url, lua, args.connections, args.duration)
        cpu = cpu_seconds(service.pids()) - before
        load_after = os.getloadavg()[0]
    requests, seconds, socket_errors, status_errors, quantiles = wrk.parse(stdout)
    ok = requests - status_errors
    return {
        "requests": requests,
        "errors": socket_errors + status_errors,
        "seconds": seconds,
        "requests_per_s": ok / seconds,
        "server_cpu_s": cpu,
        "server_cpu_ms_per_request": 1000 * cpu / max(ok, 1),
        "p50_ms": 1000 * quantiles[len(quantiles) // 2 - 1],
        "load_average": [load_before, load_after],
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per setting and the fast path's gain (positive: better with the fast path)."""
    medians = {}
    for fast in (True, False):
        mine = [r for r in runs if r["fast_path"] is fast]
        medians["on" if fast else "off"] = {
            name: statistics.median(r[name] for r in mine) for name in ("requests_per_s", "server_cpu_ms_per_request")
        }
    on, off = medians["on"], medians["off"]
    return {
        **medians,
        "requests_per_s_gain_pct": 100 * (on["requests_per_s"] / off["requests_per_s"] - 1),
        "cpu_per_request_saved_pct": 100 * (1 - on["server_cpu_ms_per_request"] / off["server_cpu_ms_per_request"]),
    }


def table(runs: list[dict[str, Any]]) -> Table:
    shown = Table(title=f"1 KB encrypt, wrk, KM_FAST_PATH on vs off ({os.cpu_count()} cores)")
    for column in ("run", "KM_FAST_PATH", "requests/s", "CPU ms/request", "p50 ms", "errors", "load avg (1 min)"):
        shown.add_column(column, justify="right")
    for number, run in enumerate(runs, 1):
        shown.add_row(
            str(number),
            "true" if run["fast_path"] else "false",
            f"{run['requests_per_s']:.0f}",
            f"{run['server_cpu_ms_per_request']:.3f}",
            f"{run['p50_ms']:.1f}",
            str(run["errors"]),
            "{:.1f} → {:.1f}".format(*run["load_average"]),
        )
    return shown


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure, print the runs and the medians, write ``fastpath.json``; 1 when a run saw errors."""
    out = directory(args)
    home = Path(tempfile.mkdtemp(prefix="km-bench-"))
    runs = []
    try:
        var_dir, pin = init_home(home)
        for number in range(args.rounds):
            for fast in (True, False):
                console.print(f"[dim]… round {number + 1}, KM_FAST_PATH={str(fast).lower()}[/dim]")
                settings = {"KM_FAST_PATH": "true" if fast else "false"}
                runs.append({"fast_path": fast, **measure_one(home, var_dir, pin, settings, args)})
    finally:
        shutil.rmtree(home, ignore_errors=True)
    console.print(table(runs))
    found = summary(runs)
    on, off = found["on"], found["off"]
    console.print(
        f"medians, on vs off: {on['requests_per_s']:.0f} vs {off['requests_per_s']:.0f} requests/s "
        f"({found['requests_per_s_gain_pct']:+.0f} %), {on['server_cpu_ms_per_request']:.3f} vs "
        f"{off['server_cpu_ms_per_request']:.3f} CPU ms/request ({found['cpu_per_request_saved_pct']:.0f} % saved)"
    )
    environment = describe(load_generator={"driver": "wrk", "connections": args.connections})
    save(out / "fastpath.json", {"command": command_line(), "environment": environment, "runs": runs, **found})
    console.print(f"written: {out / 'fastpath.json'}")
    return 1 if any(r["errors"] for r in runs) else 0


def add_parser(commands: Any) -> None:
    """The ``fastpath`` subcommand."""
    c = commands.add_parser("fastpath", help="1 KB encrypt with KM_FAST_PATH on vs off, interleaved")
    c.add_argument("--workers", type=int, default=2, help="server workers (default 2)")
    c.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    c.add_argument("--duration", type=float, default=10.0, help="measured seconds per run (default 10)")
    c.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before each (default 2)")
    c.add_argument("--rounds", type=int, default=2, help="on/off pairs (default 2)")
    c.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    c.set_defaults(func=run)
