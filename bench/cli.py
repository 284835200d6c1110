"""Command line of ``python -m bench``: subcommands ``report`` (what ``make bench`` runs), ``blobs``
(the default), ``transport``, ``app``, ``targets``,
``client``, ``envelope``, ``ceilings``, ``fastpath``, ``compare``, ``tokenize`` and ``kmip``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from bench import output
from bench.arguments import comma_list, parse_size
from bench.clients import DEFAULT_TARGETS, TARGET_NAMES

SUBCOMMANDS = ("report", "blobs", "transport", "app", "targets", "client", "envelope", "ceilings", "fastpath",
               "compare", "tokenize", "kmip")  # fmt: skip


def target_name(text: str) -> str:
    """A known target name."""
    if text.strip() not in TARGET_NAMES:
        raise argparse.ArgumentTypeError(f"unknown target {text!r} (known: {', '.join(TARGET_NAMES)})")
    return text.strip()


def shown(value: object) -> str:
    """A default as a user types it: lists comma-separated."""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


class DefaultsShown(argparse.HelpFormatter):
    """Help that names every option's default (unless its text already does, or there is none)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: {shown(action.default)})"


class BenchParser(argparse.ArgumentParser):
    """An argument parser whose help shows the defaults (subcommands' parsers included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)


def service_options() -> argparse.ArgumentParser:
    """Options of the service under test, the KMS to compare with and the output directory."""
    p = BenchParser(add_help=False)
    service = p.add_argument_group("service under test")
    service.add_argument("--spawn", action="store_true", help="start keymanager locally on SoftHSM in a temp dir")
    service.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="workers of a spawned service (default: the CPU count, as `keymanager serve` defaults to)",
    )
    service.add_argument("--url", help="a running service, e.g. https://127.0.0.1:8443")
    service.add_argument("--token", help="an ADMIN token of --url (or @FILE); the bench creates its own principal")
    service.add_argument("--ca", help="CA bundle of --url (e.g. var/tls/ca.pem)")
    service.add_argument("--server-pid", type=int, help="PID of --url's `keymanager serve` (CPU and RSS probes)")
    kms = p.add_argument_group("AWS KMS (default: a local KMS-API emulator, moto)")
    kms.add_argument("--aws-region", help="run aws-kms against real AWS KMS in this region")
    kms.add_argument("--aws-profile", help="AWS profile for real AWS KMS")
    kms.add_argument("--aws-key-id", help="existing KMS key (default: create one, scheduled for deletion after)")
    p.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    return p


def common_options() -> argparse.ArgumentParser:
    """Options most subcommands take: ``service_options`` and the window and load generator."""
    p = BenchParser(add_help=False, parents=[service_options()])
    load = p.add_argument_group("load")
    load.add_argument("--concurrency", type=comma_list(int), default=[1], help="client counts, e.g. 1,8,32")
    load.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    load.add_argument("--requests", type=int, help="operations per measurement instead of --duration")
    load.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each measurement")
    load.add_argument("--repeat", type=int, default=1, help="repeat each measurement N times; report the spread")
    load.add_argument("--client-procs", type=int, help="load processes (default: one per core, at least 2)")
    load.add_argument("--driver", choices=("python", "wrk"), default="python", help="load generator for km fields")
    load.add_argument("--batch", type=int, default=100, help="fields per batch of km-batch")
    return p


def parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    from bench import app, blobs, ceilings, client, compare, envelope, fastpath, goals, kmip, suite, tokenize, transport

    common = common_options()
    top = BenchParser(prog="python -m bench", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True, parser_class=BenchParser)
    b = commands.add_parser("blobs", parents=[common], help="small and large blob rates per target (default)")
    b.add_argument("--targets", type=comma_list(target_name), default=list(DEFAULT_TARGETS), help="targets to measure")
    b.add_argument("--sizes", type=comma_list(parse_size), default=blobs.default_sizes(), help="e.g. 512,1K,1M,70M")
    b.set_defaults(func=blobs.run)
    t = commands.add_parser("transport", parents=[common], help="HTTP vs HTTPS vs mTLS, small-field encrypt")
    t.add_argument("--size", type=parse_size, default=1_000, help="field size")
    t.add_argument("--modes", type=comma_list(str), default=list(transport.MODES), help="http,https,mtls")
    t.set_defaults(func=transport.run)
    a = commands.add_parser("app", parents=[common], help="sysbench-like customers table with card numbers")
    a.add_argument("--db-url", help="SQLAlchemy URL (default: a SQLite file in the output directory)")
    a.add_argument("--rows", type=int, default=1000, help="customers in the table")
    a.add_argument("--fields", type=int, default=10, help="rows read or written per transaction")
    a.set_defaults(func=app.run)
    g = commands.add_parser("targets", parents=[common], help="targets as fractions of ceilings")
    g.add_argument("--stream-size", type=parse_size, default=70_000_000, help="blob of the stream targets")
    g.add_argument("--field-size", type=parse_size, default=1_000, help="field of the ops/s targets")
    g.add_argument("--high-concurrency", type=int, default=32, help="connections of the ops/s targets")
    g.add_argument("--hsm-seconds", type=float, default=2.0, help="seconds per SoftHSM ceiling")
    g.add_argument(
        "--fast", action="store_true", help="tiny sizes and windows: a smoke run whose verdicts mean nothing"
    )
    g.set_defaults(func=goals.run)
    c = commands.add_parser("client", parents=[common], help="client CPU per small-field encrypt, by HTTP path")
    c.add_argument("--size", type=parse_size, default=1_000, help="field size")
    c.add_argument("--rounds", type=int, default=5, help="rounds of every path (default 5; the median is kept)")
    c.set_defaults(func=client.run)
    e = commands.add_parser("envelope", parents=[common], help="envelope encrypt/decrypt rates alone (no service)")
    e.add_argument("--size", type=parse_size, default=70_000_000, help="blob size")
    e.add_argument("--segment-size", type=parse_size, default=256 * 1024, help="segment size")
    e.set_defaults(func=envelope.run)
    suite.add_parser(commands, service_options())
    ceilings.add_parser(commands)
    fastpath.add_parser(commands)
    compare.add_parser(commands)
    tokenize.add_parser(commands)
    kmip.add_parser(commands)
    return top


def with_default_command(argv: Sequence[str]) -> list[str]:
    """``blobs`` when no subcommand is named (``-h`` alone still shows the top help)."""
    argv = list(argv)
    if argv and argv[0] in ("-h", "--help"):
        return argv
    return argv if argv and argv[0] in SUBCOMMANDS else ["blobs", *argv]


def main(argv: Sequence[str] | None = None) -> int:
    """Run a subcommand; its exit code (1 when a measurement had errors)."""
    args = parser().parse_args(with_default_command(sys.argv[1:] if argv is None else argv))
    if getattr(args, "driver", None) == "wrk" or args.command in ("ceilings", "fastpath", "compare", "targets"):
        from bench.wrk import available

        if not available():
            raise SystemExit(f"{args.command}: wrk is not installed (apt-get install wrk)")
    try:
        return int(args.func(args, Console(width=None if sys.stdout.isatty() else 160)))
    finally:
        output.discard_empty()
