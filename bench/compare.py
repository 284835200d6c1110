"""``python -m bench compare --base <rev>``: a change of the request path against a base revision,
interleaved, one driver for both sides (issue 36, item 1: the guard).

Two trees run from this one installation: the base revision (``git archive`` of ``--base``, default
``main``, extracted under ``var/compare/<commit>``) and this working tree (or ``--head``, another
revision extracted alike: bisecting). Each gets an installation of its own (its own ``keymanager
init``: the base may have fewer migrations), and its server runs that tree's code (``PYTHONPATH``
names the tree; the interpreter, the libraries and the driver are the same). Per round
(``--rounds``), base then this tree, then this tree then base in the next (A B B A …), each side's
turn (``bench.guard``) measures its ceilings, then serves that tree and measures the rows of
``--only`` (default all: 1 KB encrypt and its CPU against the raw ASGI echo, batches against
SoftHSM's CBC+HMAC pairs, the on-board stream against SoftHSM's chunked CBC, the KMS door against
the emulator, the KMIP door against native REST on one driver). Printed: every run, then per figure
each side's median and spread (lowest to highest), and this tree's change in per cent; a change
wider than both sides' own spreads is flagged ``moved``, anything else is noise (one round judges
nothing). ``compare.json`` keeps every run.
``docs/development.md`` asks for its output on every change of the request path.
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

from bench import guard
from bench.arguments import comma_list, parse_size
from bench.environment import describe
from bench.output import command_line, directory, save
from bench.service import init_home

REPOSITORY = Path(__file__).resolve().parents[1]


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


def order(number: int) -> tuple[str, str]:
    """The sides' order in round ``number`` (from 0): base first, then this tree first, alternately —
    A B B A …, so that what drifts during a run (the host's load, the page cache) favours neither."""
    return ("base", "head") if number % 2 == 0 else ("head", "base")


def summary(runs: list[dict[str, Any]], figures: list[str]) -> dict[str, Any]:
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
            for name in figures
        }
    changes = {}
    for name in figures:
        base, head = sides["base"][name], sides["head"][name]
        change = 100 * (head["median"] / base["median"] - 1)
        noise = max(_relative_spread(base), _relative_spread(head))
        repeated = min(len([r for r in runs if r["side"] == side]) for side in sides) > 1
        moved = abs(change) > noise if repeated else None  # one round: no spread to judge a change by
        changes[name] = {"change_pct": change, "noise_pct": noise, "moved": moved}
    return {"sides": sides, "changes": changes}


def _relative_spread(figure: dict[str, float]) -> float:
    return 100 * (figure["high"] - figure["low"]) / figure["median"] if figure["median"] else 0.0


def table(runs: list[dict[str, Any]], commits: dict[str, str], figures: list[str]) -> Table:
    """Every run: its side, each figure, its errors and the load average around it."""
    shown = Table(title=f"base {commits['base'][:10]} vs head {commits['head'][:10]} ({os.cpu_count()} cores)")
    for column in ("run", "side", *figures, "errors", "load"):
        shown.add_column(column, justify="right")
    for number, run in enumerate(runs, 1):
        shown.add_row(
            str(number),
            run["side"],
            *(guard.shown(name, run[name]) for name in figures),
            str(run["errors"]),
            "{:.1f} → {:.1f}".format(*run["load_average"]),
        )
    return shown


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure both trees interleaved, print the runs and the changes, write ``compare.json``; 1 on errors."""
    out = directory(args)
    base_commit, base = base_tree(args.base)
    if args.head:
        head_commit, head = base_tree(args.head)
    else:
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no").strip())
        head_commit, head = (
            _git("rev-parse", "HEAD").strip() + (" (with uncommitted changes)" if dirty else ""),
            REPOSITORY,
        )
    trees = {"base": base, "head": head}
    commits = {"base": base_commit, "head": head_commit}
    homes = {side: Path(tempfile.mkdtemp(prefix=f"km-compare-{side}-")) for side in trees}
    rows, figures = tuple(args.only), guard.figures_of(tuple(args.only))
    runs: list[dict[str, Any]] = []
    try:
        installed = {side: init_home(homes[side], {"PYTHONPATH": str(tree)}) for side, tree in trees.items()}
        echo_dir, echo_pin = installed["head"]  # the echo and SoftHSM's ceilings use this installation
        for number in range(args.rounds):
            for side in order(number):
                tree = trees[side]
                console.print(f"[dim]… round {number + 1}: the ceilings, then {side} ({', '.join(rows)})[/dim]")
                ceiling = guard.ceilings_of(rows, echo_dir, echo_pin, args)
                var_dir, pin = installed[side]
                runs.append(
                    {"side": side, "round": number + 1, **guard.side(homes[side], var_dir, pin, tree, ceiling, args)}
                )
    finally:
        for home in homes.values():
            shutil.rmtree(home, ignore_errors=True)
    console.print(table(runs, commits, figures))
    found = summary(runs, figures)
    for name, change in found["changes"].items():
        base_figure, head_figure = found["sides"]["base"][name]["median"], found["sides"]["head"][name]["median"]
        spread = f"the sides' own spread is up to {change['noise_pct']:.1f} %"
        verdict = {True: f"moved: {spread}", False: f"within noise: {spread}", None: "unjudged: one round"}
        console.print(
            f"{name} ({guard.FIGURES[name][1]}, {guard.FIGURES[name][2]} is better): base "
            f"{guard.shown(name, base_figure)}, head {guard.shown(name, head_figure)}: {change['change_pct']:+.1f} % "
            f"({verdict[change['moved']]})"
        )
    environment = describe(load_generator={"driver": "wrk", "connections": args.connections})
    document = {"command": command_line(), "environment": environment, "commits": commits, "runs": runs, **found}
    save(out / "compare.json", document)
    console.print(f"written: {out / 'compare.json'}")
    return 1 if any(r["errors"] for r in runs) else 0


def row(name: str) -> str:
    """A row of ``--only``, refused unless it is one of ``guard.ROWS``."""
    if name not in guard.ROWS:
        raise argparse.ArgumentTypeError(f"{name!r} is not a row: choose among {', '.join(guard.ROWS)}")
    return name


def add_parser(commands: Any) -> None:
    """The ``compare`` subcommand."""
    c = commands.add_parser("compare", help="this tree against --base: the hot path as fractions of ceilings, A B B A")
    c.add_argument("--base", default="main", help="the revision to compare with (default main)")
    c.add_argument("--head", help="a revision to measure instead of this working tree (bisecting)")
    c.add_argument("--workers", type=int, default=2, help="server workers (default 2)")
    c.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    c.add_argument("--duration", type=float, default=10.0, help="measured seconds per run (default 10)")
    c.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before each (default 2)")
    c.add_argument("--rounds", type=int, default=2, help="base/this-tree pairs (default 2)")
    c.add_argument(
        "--only", type=comma_list(row), default=list(guard.ROWS), help=f"rows, of {','.join(guard.ROWS)} (default all)"
    )
    c.add_argument("--stream-size", type=parse_size, default=70_000_000, help="blob of the stream row (default 70M)")
    c.add_argument("--hsm-seconds", type=float, default=2.0, help="seconds per SoftHSM ceiling (default 2)")
    c.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    c.set_defaults(func=run)
