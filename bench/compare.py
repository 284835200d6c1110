"""``python -m bench compare --base <rev>``: a change of the request path against a base revision,
interleaved, one driver for both sides (issue 36, item 1: the guard).

Two trees run from this one installation: the base revision (``git archive`` of ``--base``,
default ``main``, extracted under ``var/compare/<commit>``) and this working tree. Each gets an
installation of its own (its own ``keymanager init``: the base may have fewer migrations), and
its server runs that tree's code (``PYTHONPATH`` names the tree; the interpreter, the libraries
and the driver are the same). Per round, in the order A B (base, this tree) ``--rounds`` times: the
raw ASGI HTTPS echo's ceiling (the same wrk, connections and body), then each side's 1 KB encrypt
with wrk (``bench/fastpath.py``'s measurement). Each side's figures are fractions of the ceiling of
their own round: requests/s ÷ the echo's, server CPU per request ÷ the echo's. Printed: every run,
then per side the median and the spread (lowest to highest), and this tree's change in per cent;
a change wider than both sides' own spreads is flagged ``moved``, anything else is noise.
``compare.json`` keeps every run. ``docs/development.md`` asks for its output on every change of
the request path.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.ceilings import http_ceiling
from bench.environment import describe
from bench.fastpath import measure_one
from bench.output import command_line, directory, save
from bench.service import init_home

REPOSITORY = Path(__file__).resolve().parents[1]
FIGURES = ("of_echo", "cpu_of_echo", "requests_per_s", "server_cpu_ms_per_request")
"""What each run gives: req/s ÷ the echo's, CPU per request ÷ the echo's, and the raw figures."""


def base_tree(revision: str) -> tuple[str, Path]:
    """The commit ``revision`` names and its tree, extracted once under ``var/compare/<commit>``."""
    commit = _git("rev-parse", "--verify", f"{revision}^{{commit}}").strip()
    tree = REPOSITORY / "var" / "compare" / commit
    if not (tree / "keymanager" / "__init__.py").exists():
        archive = subprocess.run(
            ["git", "-C", str(REPOSITORY), "archive", "--format=tar", commit],
            capture_output=True,
            check=True,
            timeout=120,
        ).stdout
        tree.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as files:
            files.extractall(tree, filter="data")
    return commit, tree


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPOSITORY), *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"bench compare: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per side the median and spread of each figure; this tree's change against the base, flagged."""
    sides: dict[str, dict[str, Any]] = {}
    for side in ("base", "head"):
        mine = [r for r in runs if r["side"] == side]
        sides[side] = {
            name: {
                "median": statistics.median(r[name] for r in mine),
                "low": min(r[name] for r in mine),
                "high": max(r[name] for r in mine),
            }
            for name in FIGURES
        }
    changes = {}
    for name in FIGURES:
        base, head = sides["base"][name], sides["head"][name]
        change = 100 * (head["median"] / base["median"] - 1)
        noise = max(_relative_spread(base), _relative_spread(head))
        changes[name] = {"change_pct": change, "noise_pct": noise, "moved": abs(change) > noise}
    return {"sides": sides, "changes": changes}


def _relative_spread(figure: dict[str, float]) -> float:
    return 100 * (figure["high"] - figure["low"]) / figure["median"] if figure["median"] else 0.0


def table(runs: list[dict[str, Any]], commits: dict[str, str]) -> Table:
    shown = Table(title=f"1 KB encrypt, wrk, base {commits['base'][:10]} vs this tree ({os.cpu_count()} cores)")
    for column in ("run", "side", "req/s", "÷ echo", "CPU ms/req", "CPU ÷ echo", "echo req/s", "errors", "load"):
        shown.add_column(column, justify="right")
    for number, run in enumerate(runs, 1):
        shown.add_row(
            str(number),
            run["side"],
            f"{run['requests_per_s']:.0f}",
            f"{100 * run['of_echo']:.1f} %",
            f"{run['server_cpu_ms_per_request']:.3f}",
            f"{run['cpu_of_echo']:.2f}x",
            f"{run['echo']['requests_per_s']:.0f}",
            str(run["errors"]),
            "{:.1f} → {:.1f}".format(*run["load_average"]),
        )
    return shown


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure both trees interleaved, print the runs and the changes, write ``compare.json``; 1 on errors."""
    out = directory(args)
    base_commit, base = base_tree(args.base)
    head_commit = _git("rev-parse", "HEAD").strip()
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no").strip())
    trees = {"base": base, "head": REPOSITORY}
    commits = {"base": base_commit, "head": head_commit + (" (with uncommitted changes)" if dirty else "")}
    homes = {side: Path(tempfile.mkdtemp(prefix=f"km-compare-{side}-")) for side in trees}
    runs: list[dict[str, Any]] = []
    try:
        installed = {side: init_home(homes[side], {"PYTHONPATH": str(tree)}) for side, tree in trees.items()}
        for number in range(args.rounds):
            echo_dir = installed["head"][0]  # the echo serves with this installation's development TLS
            for side in trees:
                console.print(f"[dim]… round {number + 1}: the echo's ceiling, then {side}[/dim]")
                window = (args.workers, args.connections, args.duration, args.warmup)
                echo = http_ceiling("raw_asgi_echo", echo_dir, *window)
                var_dir, pin = installed[side]
                found = measure_one(homes[side], var_dir, pin, {"PYTHONPATH": str(trees[side])}, args)
                echo_cpu_ms = echo["server_cpu_us_per_request"] / 1000
                runs.append(
                    {
                        "side": side,
                        "round": number + 1,
                        **found,
                        "echo": echo,
                        "of_echo": found["requests_per_s"] / echo["requests_per_s"],
                        "cpu_of_echo": found["server_cpu_ms_per_request"] / max(echo_cpu_ms, 1e-9),
                    }
                )
    finally:
        for home in homes.values():
            shutil.rmtree(home, ignore_errors=True)
    console.print(table(runs, commits))
    found = summary(runs)
    for name, change in found["changes"].items():
        base_figure, head_figure = found["sides"]["base"][name]["median"], found["sides"]["head"][name]["median"]
        verdict = "moved" if change["moved"] else "within noise"
        console.print(
            f"{name}: base {base_figure:.4g}, this tree {head_figure:.4g}: {change['change_pct']:+.1f} % "
            f"({verdict}: the sides' own spread is up to {change['noise_pct']:.1f} %)"
        )
    environment = describe(load_generator={"driver": "wrk", "connections": args.connections})
    document = {"command": command_line(), "environment": environment, "commits": commits, "runs": runs, **found}
    save(out / "compare.json", document)
    console.print(f"written: {out / 'compare.json'}")
    return 1 if any(r["errors"] or r["echo"]["errors"] for r in runs) else 0


def add_parser(commands: Any) -> None:
    """The ``compare`` subcommand."""
    c = commands.add_parser("compare", help="this tree against --base, 1 KB encrypt as fractions of the echo, A B A B")
    c.add_argument("--base", default="main", help="the revision to compare with (default main)")
    c.add_argument("--workers", type=int, default=2, help="server workers (default 2)")
    c.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    c.add_argument("--duration", type=float, default=10.0, help="measured seconds per run (default 10)")
    c.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before each (default 2)")
    c.add_argument("--rounds", type=int, default=2, help="base/this-tree pairs (default 2)")
    c.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    c.set_defaults(func=run)
