"""Where a run's files go and what every JSON report says about its setting."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.environment import describe
from bench.report import write_json

if TYPE_CHECKING:
    from bench.rig import Rig


CREATED: list[Path] = []
"""Output directories this process created (``discard_empty`` removes those it left empty)."""


def directory(args: argparse.Namespace) -> Path:
    """``--out``, or ``bench-out/<timestamp>``; created."""
    out = Path(args.out) if args.out else Path("bench-out") / time.strftime("%Y%m%d-%H%M%S")
    if not out.exists():
        CREATED.append(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def discard_empty() -> None:
    """Remove the output directories this process created and wrote nothing into (a refused or failed
    run leaves no empty timestamped directory behind)."""
    while CREATED:
        out = CREATED.pop()
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()


def command_line() -> str:
    """The command this run was started with."""
    return shlex.join(["python", "-m", "bench", *sys.argv[1:]])


def environment(args: argparse.Namespace, r: Rig) -> dict[str, Any]:
    """The machine, the versions, the TLS negotiated, the service's workers and the load generator."""
    service = r.service
    return describe(
        url=service.url if service else None,
        ca=service.ca if service else None,
        service_spawned=bool(args.spawn),
        service_workers=service.workers if service else None,
        service_cpu_affinity="serve's default" if args.spawn else None,  # pinned when the CPUs are its own
        load_generator={"processes": r.pool.size, "driver": args.driver},
        kms=r.aws.label if r.aws else None,
        kms_api_door=r.door.label if r.door else None,
        settings={k: v for k, v in vars(args).items() if k not in ("token", "func")},
    )


def save(path: Path, document: dict[str, Any]) -> None:
    """Write a JSON report."""
    write_json(path, document)
