"""``python -m bench.scaleout``: two replicas on PostgreSQL behind HAProxy against one replica on SQLite.

The compose topology of ``deploy/`` without containers: ``keymanager init`` on a throwaway
PostgreSQL database (``km_scaleout_<hex>`` on ``--db-server``, dropped afterwards), then two
``keymanager serve`` replicas of ``--workers`` processes each, sharing that database and one
SoftHSM token directory (as ``deploy/docker-compose.yml`` shares the ``keymanager-state``
volume), behind HAProxy run from ``deploy/haproxy.cfg`` itself (TLS passthrough, ``leastconn``,
``/v1/ready`` checks) with only the addresses changed. Against it, in turn (``--rounds`` times):

- *sqlite, 1 replica*: one replica on SQLite (an installation of its own) with as many workers as the
  two replicas together, reached directly;
- *postgresql, 1 replica*: one replica on the PostgreSQL installation, same worker count, directly;
- *postgresql, 2 replicas*: the two replicas through HAProxy.

wrk posts the 1 KB encrypt JSON at ``--connections`` connections: ``--warmup`` seconds, then
``--duration`` seconds measured. Per setup: requests/s; CPU per request (user + system from
``/proc``) of the keymanager processes, of HAProxy and of the PostgreSQL backends serving the
database; the audit records and group commits (sealed records: every commit seals its last
record) committed per second; and, on PostgreSQL, from ``pg_stat_activity`` sampled every 10 ms:
how many backends wait for a lock (no audit append waits for another since every writer has a
chain of its own: any wait is a regression), the share of samples in which a backend is inside
an audit append, hence the time an append takes (its statement and the WAL flush), and the most
connections the replicas held. ``--audit-lanes`` sets the PostgreSQL replicas'
``KM_AUDIT_WRITER_LANES``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import os
import re
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
from rich.console import Console
from rich.table import Table

from bench import wrk
from bench.environment import describe
from bench.output import directory, save
from bench.probes import cpu_seconds
from bench.service import Service, free_port, init_home, provision, serve, wait_ready

FIELD_BYTES = 1_000
HAPROXY_CFG = Path(__file__).resolve().parent.parent / "deploy" / "haproxy.cfg"
PROXY_SOURCE = "127.0.0.9"
"""HAProxy's address towards the replicas: the only one they trust (``KM_TRUSTED_PROXIES``) to send
the PROXY header; the bench's direct connections come from 127.0.0.1 and send none."""
SQLITE, POSTGRES_ONE, POSTGRES_TWO = "sqlite, 1 replica", "postgresql, 1 replica", "postgresql, 2 replicas"
SETUPS = (SQLITE, POSTGRES_ONE, POSTGRES_TWO)


@dataclasses.dataclass(frozen=True)
class Installation:
    """One ``keymanager init``: its home, var dir, SoftHSM PIN and database URL (None: SQLite)."""

    home: Path
    var_dir: Path
    pin: str
    database_url: str | None

    def settings(self) -> dict[str, str]:
        return {"KM_DATABASE_URL": self.database_url} if self.database_url else {}


def install(home: Path, database_url: str | None) -> Installation:
    """Run ``keymanager init`` in ``home`` on ``database_url`` (SQLite under the var dir when None)."""
    home.mkdir(parents=True, exist_ok=True)
    var_dir, pin = init_home(home, {"KM_DATABASE_URL": database_url} if database_url else None)
    return Installation(home, var_dir, pin, database_url)


# -- PostgreSQL: the throwaway database, its backends, its lock waits ---------------------------
def libpq(url: str) -> str:
    """A SQLAlchemy ``postgresql+psycopg://`` URL as libpq takes it."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@contextlib.contextmanager
def throwaway_database(server_url: str) -> Iterator[str]:
    """A new empty database ``km_scaleout_<hex>`` on ``server_url``'s server (its SQLAlchemy URL);
    dropped at the end, its connections ended first."""
    name = f"km_scaleout_{secrets.token_hex(6)}"
    base, _, _ = server_url.rpartition("/")
    with psycopg.connect(libpq(server_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(libpq(server_url), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


@dataclasses.dataclass
class LockSamples:
    """``pg_stat_activity`` of one database, sampled: per sample, the backends waiting for a lock
    (the chain head's, on this workload), whether one was inside an audit append (holding the chain
    head), how many were connected; and every backend's process id."""

    waiting: list[int] = dataclasses.field(default_factory=list)
    holding: list[bool] = dataclasses.field(default_factory=list)
    connected: list[int] = dataclasses.field(default_factory=list)
    pids: set[int] = dataclasses.field(default_factory=set)

    def figures(self, commits_per_s: float) -> dict[str, Any]:
        """Lock waits, the share of samples with the chain head held, the hold time per commit and
        the commit rate it allows, the most connections."""
        samples = max(len(self.waiting), 1)
        busy = sum(self.holding) / samples
        hold = busy / commits_per_s if commits_per_s else None
        return {
            "lock_waiting_backends_mean": sum(self.waiting) / samples,
            "lock_wait_samples_pct": 100 * sum(1 for w in self.waiting if w) / samples,
            "chain_head_busy_pct": 100 * busy,
            "chain_head_hold_ms_per_commit": None if hold is None else 1000 * hold,
            "chain_head_ceiling_commits_per_s": None if not hold else 1 / hold,
            "connections_max": max(self.connected, default=0),
        }


def sample_locks(url: str, stop: threading.Event) -> LockSamples:
    """Sample ``url``'s database every 10 ms until ``stop`` is set."""
    found = LockSamples()
    query = (
        "SELECT pid, wait_event_type, state <> 'idle' AND query LIKE '%%audit_%%' FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(libpq(url), autocommit=True) as connection:
        while not stop.is_set():
            rows = connection.execute(query, (url.rpartition("/")[2],)).fetchall()
            found.waiting.append(sum(1 for _, event, _ in rows if event == "Lock"))
            found.holding.append(any(audit and event != "Lock" for _, event, audit in rows))
            found.connected.append(len(rows))
            found.pids.update(pid for pid, _, _ in rows)
            stop.wait(0.01)
    return found


def backend_pids(url: str) -> list[int]:
    """Process ids of the PostgreSQL backends connected to ``url``'s database now."""
    with psycopg.connect(libpq(url), autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (url.rpartition("/")[2],),
        ).fetchall()
    return [pid for (pid,) in rows]


def cpu_by_pid(pids: set[int]) -> dict[int, float]:
    """User + system CPU seconds of each process still alive."""
    found = {}
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            times = psutil.Process(pid).cpu_times()
            found[pid] = times.user + times.system
    return found


# -- the audit chain as committed ----------------------------------------------------------------
def audit_counts(installation: Installation) -> tuple[int, int]:
    """Records and sealed records (= group commits) in the chain now."""
    query = "SELECT count(*), count(seal) FROM audit_records"
    if installation.database_url is None:
        with contextlib.closing(sqlite3.connect(installation.var_dir / "keymanager.db", timeout=30)) as db:
            records, sealed = db.execute(query).fetchone()
    else:
        with psycopg.connect(libpq(installation.database_url), autocommit=True) as db:
            row = db.execute(query).fetchone()
            records, sealed = row if row else (0, 0)
    return int(records), int(sealed)


# -- HAProxy from deploy/haproxy.cfg ----------------------------------------------------------
def haproxy_config(port: int, replicas: list[int], kmip: tuple[int, list[int]] | None = None) -> str:
    """``deploy/haproxy.cfg`` with the addresses of this machine: the listener on 127.0.0.1:``port``,
    the replicas on 127.0.0.1, reached from :data:`PROXY_SOURCE` (the one address the replicas
    trust to send the PROXY header), no Docker DNS resolver. Everything else (mode tcp, leastconn,
    the PROXY v2 header, the ``/v1/ready`` checks, the timeouts) as deployed. The KMIP sections
    are left out, or with ``kmip`` (the KMIP listener's port and the replicas' KMIP ports, in the
    order of ``replicas``) rewritten the same way."""
    text = HAPROXY_CFG.read_text()
    text = re.sub(r"(?ms)^resolvers docker\n.*?\n\n", "", text)
    text = text.replace(" resolvers docker init-addr last,libc,none", f" source {PROXY_SOURCE}")
    text = re.sub(r"(?m)^(\s+bind) :8443$", rf"\1 127.0.0.1:{port}", text)
    https, kmip_part = text.split("\nfrontend keymanager_kmip\n", 1)
    for number, replica in enumerate(replicas, 1):
        https = re.sub(rf"(?m)^(\s+server keymanager-{number}) \S+$", rf"\1 127.0.0.1:{replica}", https)
    servers = len(replicas)
    if kmip is not None:
        kmip_part = re.sub(r"(?m)^(\s+bind) :5696$", rf"\1 127.0.0.1:{kmip[0]}", kmip_part)
        for number, (replica, kmip_replica) in enumerate(zip(replicas, kmip[1], strict=True), 1):
            kmip_part = re.sub(
                rf"(?m)^(\s+server keymanager-{number}) \S+ port 8443$",
                rf"\1 127.0.0.1:{kmip_replica} port {replica}",
                kmip_part,
            )
        https, servers = f"{https}\nfrontend keymanager_kmip\n{kmip_part}", 2 * len(replicas)
    shape = "send-proxy-v2" in https and PROXY_SOURCE in https and https.count("server keymanager-") == servers
    if "resolvers" in https or re.search(r":8443|:5696| 8443$", https, re.MULTILINE) or not shape:
        raise RuntimeError(f"{HAPROXY_CFG} changed shape: the bench cannot rewrite its addresses")
    return https


@contextlib.contextmanager
def haproxy(home: Path, replicas: list[Service]) -> Iterator[tuple[str, int]]:
    """HAProxy in front of ``replicas`` until the block ends: its URL and process id."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    port = free_port()
    config = home / "haproxy.cfg"
    config.write_text(haproxy_config(port, [int(s.url.rpartition(":")[2]) for s in replicas]))
    log = home / "haproxy.log"
    with log.open("ab") as out:
        process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=out, stderr=out)
    try:
        url = f"https://127.0.0.1:{port}"
        wait_ready(url, replicas[0].ca, process, log)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=20)


# -- one setup measured ----------------------------------------------------------------------
@contextlib.contextmanager
def replicas(installation: Installation, count: int, workers: int, lanes: int = 1) -> Iterator[list[Service]]:
    """``count`` replicas of ``workers`` processes each on ``installation`` until the block ends,
    trusting HAProxy (:data:`PROXY_SOURCE`) to name the clients."""
    settings = {**installation.settings(), "KM_TRUSTED_PROXIES": f"{PROXY_SOURCE}/32"}
    if installation.database_url is not None:
        settings["KM_AUDIT_WRITER_LANES"] = str(lanes)
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(
                serve(installation.home, installation.var_dir, installation.pin, workers, settings=settings)
            )
            for _ in range(count)
        ]


def measure(
    setup: str, installation: Installation, services: list[Service], url: str, proxy_pid: int | None, args: Any
) -> dict[str, Any]:
    """Warm up, then one measured wrk run against ``url``; the figures of the module docstring."""
    endpoint = provision(services[0])
    endpoint = dataclasses.replace(endpoint, url=url)
    service_pids = [pid for s in services for pid in s.pids()]
    with tempfile.TemporaryDirectory() as tmp:
        lua = Path(tmp) / "encrypt.lua"
        lua.write_text(wrk.script(endpoint, FIELD_BYTES, decrypt=False))
        wrk.run_wrk(url, lua, args.connections, args.warmup)
        database = installation.database_url
        backends = set(backend_pids(database)) if database else set()
        records, commits = audit_counts(installation)
        before = {"service": cpu_seconds(service_pids), "proxy": cpu_seconds([proxy_pid] if proxy_pid else [])}
        db_before = cpu_by_pid(backends)
        load_before, start = os.getloadavg()[0], time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            stop = threading.Event()
            sampling = pool.submit(sample_locks, database, stop) if database else None
            try:
                stdout = wrk.run_wrk(url, lua, args.connections, args.duration)
            finally:
                stop.set()
            samples = sampling.result() if sampling else None
        wall = time.monotonic() - start
        after = {"service": cpu_seconds(service_pids), "proxy": cpu_seconds([proxy_pid] if proxy_pid else [])}
        backends |= samples.pids if samples else set()
        db_after = cpu_by_pid(backends)
        records_after, commits_after = audit_counts(installation)
    requests, seconds, socket_errors, status_errors, quantiles = wrk.parse(stdout)
    ok = max(requests - status_errors, 1)
    db_cpu = sum(cpu - db_before.get(pid, 0.0) for pid, cpu in db_after.items())
    found = {
        "setup": setup,
        "replicas": len(services),
        "workers_per_replica": services[0].workers,
        "requests_per_s": ok / seconds,
        "p50_ms": 1000 * quantiles[len(quantiles) // 2 - 1],
        "errors": socket_errors + status_errors,
        "service_cpu_us_per_request": 1e6 * (after["service"] - before["service"]) / ok,
        "haproxy_cpu_us_per_request": 1e6 * (after["proxy"] - before["proxy"]) / ok if proxy_pid else None,
        "postgres_cpu_us_per_request": 1e6 * db_cpu / ok if database else None,
        "audit_records_per_s": (records_after - records) / wall,
        "audit_commits_per_s": (commits_after - commits) / wall,
        "load_average": [load_before, os.getloadavg()[0]],
    }
    found["records_per_commit"] = found["audit_records_per_s"] / max(found["audit_commits_per_s"], 1e-9)
    if samples:
        found.update(samples.figures(found["audit_commits_per_s"]))
    return found


def run_setup(setup: str, sqlite: Installation, postgres: Installation, args: Any) -> dict[str, Any]:
    """Start the servers of ``setup``, measure, stop them."""
    if setup == POSTGRES_TWO:
        with (
            replicas(postgres, 2, args.workers, args.audit_lanes) as services,
            haproxy(postgres.home, services) as (
                url,
                pid,
            ),
        ):
            return measure(setup, postgres, services, url, pid, args)
    installation = sqlite if setup == SQLITE else postgres
    with replicas(installation, 1, 2 * args.workers, args.audit_lanes) as services:
        return measure(setup, installation, services, services[0].url, None, args)


# -- output ----------------------------------------------------------------------------------
def number(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def table(runs: list[dict[str, Any]]) -> Table:
    shown = Table(title=f"1 KB encrypt, wrk, HTTPS, audit on ({os.cpu_count()} cores; CPU µs per request)")
    columns = (
        "setup",
        "req/s",
        "p50 ms",
        "service µs",
        "haproxy µs",
        "postgres µs",
        "audit rec/s",
        "commits/s",
        "rec/commit",
        "lock waiters",
        "lock wait %",
        "in append %",
        "ms/append",
        "PG conns",
        "errors",
        "load avg",
    )
    for column in columns:
        shown.add_column(column, justify="left" if column == "setup" else "right", no_wrap=column == "setup")
    for run in runs:
        shown.add_row(
            f"{run['setup']} ({run['workers_per_replica']} workers each)",
            number(run["requests_per_s"]),
            number(run["p50_ms"], 1),
            number(run["service_cpu_us_per_request"]),
            number(run["haproxy_cpu_us_per_request"]),
            number(run["postgres_cpu_us_per_request"]),
            number(run["audit_records_per_s"]),
            number(run["audit_commits_per_s"]),
            number(run["records_per_commit"], 1),
            number(run.get("lock_waiting_backends_mean"), 2),
            number(run.get("lock_wait_samples_pct"), 0),
            number(run.get("chain_head_busy_pct"), 0),
            number(run.get("chain_head_hold_ms_per_commit"), 2),
            number(run.get("connections_max")),
            str(run["errors"]),
            "{:.1f} → {:.1f}".format(*run["load_average"]),
        )
    return shown


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per setup, the median of each numeric figure over the rounds."""
    found = {}
    for setup in SETUPS:
        mine = [r for r in runs if r["setup"] == setup]
        names = [name for name, value in mine[0].items() if isinstance(value, int | float)]
        found[setup] = {
            name: statistics.median(r[name] for r in mine if r[name] is not None)
            for name in names
            if any(r[name] is not None for r in mine)
        }
    return found


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure every setup ``--rounds`` times, interleaved; print, write ``scaleout.json``; 1 on errors."""
    if not wrk.available():
        raise SystemExit("scaleout: wrk is not installed (apt-get install wrk)")
    out = directory(args)
    root = Path(tempfile.mkdtemp(prefix="km-scaleout-"))
    runs: list[dict[str, Any]] = []
    try:
        with throwaway_database(args.db_server) as database_url:
            console.print("[dim]… keymanager init: SQLite, PostgreSQL[/dim]")
            sqlite = install(root / "sqlite", None)
            postgres = install(root / "postgresql", database_url)
            for round_number in range(args.rounds):
                for setup in SETUPS:
                    console.print(f"[dim]… round {round_number + 1}, {setup}[/dim]")
                    runs.append(run_setup(setup, sqlite, postgres, args))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    console.print(table(runs))
    environment = describe(load_generator={"driver": "wrk", "connections": args.connections})
    document = {"command": sys.argv, "environment": environment, "runs": runs, "medians": medians(runs)}
    save(out / "scaleout.json", document)
    console.print(f"written: {out / 'scaleout.json'}")
    return 1 if any(r["errors"] for r in runs) else 0


def parser() -> argparse.ArgumentParser:
    """The options of ``python -m bench.scaleout``."""
    p = argparse.ArgumentParser(prog="python -m bench.scaleout", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=1, help="workers per PostgreSQL replica (default 1)")
    p.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per run (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before each (default 2)")
    p.add_argument("--rounds", type=int, default=1, help="rounds of the three setups (default 1)")
    p.add_argument(
        "--audit-lanes", type=int, default=1, help="KM_AUDIT_WRITER_LANES of the PostgreSQL replicas (default 1)"
    )
    p.add_argument(
        "--db-server",
        default=os.environ.get("KM_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server where the bench may create and drop a database (default: local, trust auth)",
    )
    p.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run from the command line."""
    args = parser().parse_args(argv)
    return run(args, Console(width=None if sys.stdout.isatty() else 240))


if __name__ == "__main__":
    sys.exit(main())
