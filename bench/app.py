"""``python -m bench app``: an application's transactions per second with and without encryption.

Shaped like a sysbench OLTP run on a ``bench_customers`` table (id, name, card number) in SQLite
(default) or PostgreSQL (``--db-url``). A read transaction selects ``--fields`` random rows and
decrypts their card numbers; a write transaction encrypts that many card numbers and updates
the rows. Modes: ``plain`` (no encryption), ``onboard`` (one service call per field), ``batch``
(one ``encrypt_many``/``decrypt_many`` per transaction), ``envelope`` (local AES-256-GCM per
field under a data key fetched once and cached by the application) and ``token`` (the card
number replaced by an FF1 token, one ``tokenize``/``detokenize`` call per field). Every decrypted
card number is compared with the one expected for its row. Transactions per second are counted
over the window in which every client thread was running (``bench.measure.common_window``: the
last thread's first transaction to the first thread's last answer). Beside transactions/s and
latency, the CPU of the application (this process), the key manager and the database's backends
over each window, in % of one core.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import psutil
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from keymanager_sdk import KeyManager
from rich.console import Console
from rich.table import Table
from sqlalchemy import Column, Engine, Integer, MetaData, String, create_engine, make_url, select, text, update
from sqlalchemy import Table as SqlTable

from bench import environment, output
from bench.clients import unwrap
from bench.measure import common_window, inside, shares_inside, weighted_mean
from bench.rig import service_from
from bench.service import Endpoint, Service, provision
from bench.stats import Distribution, percentile
from bench.tokenize import luhn_residue, provision_tokens

MODES = ("plain", "onboard", "batch", "envelope", "token")
CpuReader = Callable[[], dict[int, float]]
"""CPU seconds used so far per process of one party (application, key manager, database)."""
AAD = b"bench_customers.card"
metadata = MetaData()
customers = SqlTable(
    "bench_customers",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(100)),
    Column("card", String(400)),
)


def card_of(row_id: int) -> bytes:
    """The card number of a row: 16 digits, Luhn-valid (known, so decryptions can be checked)."""
    body = f"4{row_id:014d}"
    return (body + str((10 - luhn_residue(body + "0")) % 10)).encode()


class Cipher:
    """How a mode turns card numbers into the stored column and back, many at a time."""

    def __init__(self, mode: str, km: KeyManager | None, key: str, data_key: bytes | None) -> None:
        self.mode, self.km, self.key = mode, km, key
        self.aead = AESGCM(data_key) if data_key else None

    def seal(self, cards: Sequence[bytes]) -> list[str]:
        """Stored values of ``cards``."""
        if self.mode == "plain":
            return [c.decode() for c in cards]
        if self.mode == "envelope":
            assert self.aead is not None
            return [self.local_seal(c) for c in cards]
        assert self.km is not None
        if self.mode == "batch":
            return [unwrap(r).ciphertext for r in self.km.encrypt_many(self.key, cards)]
        if self.mode == "token":
            return [self.km.tokenize(self.key, c.decode()).token for c in cards]
        return [self.km.encrypt(self.key, c) for c in cards]

    def open(self, stored: Sequence[str]) -> list[bytes]:
        """Card numbers of stored values."""
        if self.mode == "plain":
            return [s.encode() for s in stored]
        if self.mode == "envelope":
            assert self.aead is not None
            aead = self.aead
            return [aead.decrypt(raw[:12], raw[12:], AAD) for raw in (base64.b64decode(s) for s in stored)]
        assert self.km is not None
        if self.mode == "batch":
            return [unwrap(r) for r in self.km.decrypt_many(self.key, stored)]
        if self.mode == "token":
            return [self.km.detokenize(self.key, s).encode() for s in stored]
        return [self.km.decrypt(s) for s in stored]

    def seal_all(self, cards: Sequence[bytes]) -> list[str]:
        """Stored values of many ``cards`` in as few calls as the mode allows (the table's set-up, not
        measured): one batch for the per-field modes too, whose ciphertexts and tokens are the same."""
        if self.km is not None and self.mode == "onboard":
            return [unwrap(r).ciphertext for r in self.km.encrypt_many(self.key, cards)]
        if self.km is not None and self.mode == "token":
            return [unwrap(r).token for r in self.km.tokenize_batch(self.key, [c.decode() for c in cards])]
        return self.seal(cards)

    def local_seal(self, card: bytes) -> str:
        """AES-256-GCM under the cached data key: base64 of nonce ‖ ciphertext ‖ tag."""
        assert self.aead is not None
        nonce = os.urandom(12)
        return base64.b64encode(nonce + self.aead.encrypt(nonce, card, AAD)).decode()


@dataclass
class Tps:
    """Transactions of one kind, mode and concurrency (in one round of a report)."""

    mode: str
    kind: str
    concurrency: int
    round: int = 0
    elapsed: float = 0.0
    """Seconds of the window in which every client thread was running (``close_window``)."""
    latencies: list[float] = field(default_factory=list)
    """Seconds of each transaction counted (overlapping the window), with ``shares`` its share inside."""
    shares: list[float] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)
    clients: list[tuple[float, float]] = field(default_factory=list)
    """Every transaction's span, and each thread's first start and last end (``time.monotonic()``)."""
    errors: Counter[str] = field(default_factory=Counter)
    cpu_s: dict[str, float] = field(default_factory=dict)
    """CPU seconds over the window per party (``app``, ``keymanager``, ``database``) that was measured."""
    probed_s: float = 0.0
    """Wall seconds over which the CPU figures were read."""

    @property
    def tps(self) -> float:
        """Transactions per second over the window (those across an edge by their share)."""
        return sum(self.shares) / self.elapsed if self.elapsed else 0.0

    @property
    def window_latency(self) -> float:
        """Mean transaction latency (seconds), each weighted by its share inside the window; NaN without any."""
        return weighted_mean(self.latencies, self.shares)

    def close_window(self) -> None:
        """Count the transactions of the window in which every thread ran (from ``spans`` and ``clients``)."""
        start, end = common_window(self.clients)
        counted = inside(self.spans, start, end)
        self.elapsed = end - start
        self.latencies = [e - s for s, e in counted]
        self.shares = shares_inside(counted, start, end)

    @property
    def p95(self) -> float:
        """The 95th percentile latency, seconds (NaN without transactions)."""
        return percentile(sorted(self.latencies), 95.0)

    def cpu_pct(self, party: str) -> float | None:
        """``party``'s CPU over the window in % of one core; None when it was not measured."""
        seconds = self.cpu_s.get(party)
        return None if seconds is None or not self.probed_s else seconds / self.probed_s * 100

    def as_json(self) -> dict[str, Any]:
        """Figures for the report, with every latency (ms)."""
        return {
            "mode": self.mode,
            "kind": self.kind,
            "concurrency": self.concurrency,
            "round": self.round,
            "tps": self.tps,
            "transactions": len(self.latencies),
            "elapsed_s": self.elapsed,
            "latency": {**Distribution.of(self.latencies).as_ms(), "p95_ms": self.p95 * 1e3},
            "cpu_pct_of_one_core": {party: self.cpu_pct(party) for party in self.cpu_s},
            "errors": dict(self.errors),
            "latencies_ms": [round(x * 1e3, 3) for x in self.latencies],
            "shares_in_window": [round(x, 4) for x in self.shares],
        }


def populate(engine: Engine, cipher: Cipher, rows: int) -> None:
    """Recreate the table with ``rows`` customers, card numbers stored as the mode stores them."""
    metadata.drop_all(engine)
    metadata.create_all(engine)
    with engine.begin() as conn:
        for start in range(1, rows + 1, 500):
            ids = list(range(start, min(rows, start + 499) + 1))
            stored = cipher.seal_all([card_of(i) for i in ids])
            conn.execute(
                customers.insert(),
                [{"id": i, "name": f"customer {i}", "card": s} for i, s in zip(ids, stored, strict=True)],
            )


def read_txn(engine: Engine, cipher: Cipher, ids: list[int]) -> None:
    """Select the rows, decrypt their cards, check them."""
    with engine.begin() as conn:
        found = conn.execute(select(customers.c.id, customers.c.card).where(customers.c.id.in_(ids))).all()
    cards = cipher.open([row.card for row in found])
    if [card_of(row.id) for row in found] != cards or len(found) != len(set(ids)):
        raise ValueError("mismatch")


def write_txn(engine: Engine, cipher: Cipher, ids: list[int]) -> None:
    """Encrypt the rows' cards and update them in one transaction, in id order (so that concurrent
    writers wait for each other's row locks instead of deadlocking)."""
    ids = sorted(ids)
    stored = cipher.seal([card_of(i) for i in ids])
    with engine.begin() as conn:
        for row_id, value in zip(ids, stored, strict=True):
            conn.execute(update(customers).where(customers.c.id == row_id).values(card=value))


def drive(
    txn: Callable[[list[int]], None], result: Tps, rows: int, fields: int, end: float, lock: threading.Lock
) -> None:
    """One client thread: transactions on random rows until ``end``; their spans go to ``result``."""
    rng = random.Random()  # noqa: S311 (row choice, not security)
    spans: list[tuple[float, float]] = []
    while time.monotonic() < end:
        ids = rng.sample(range(1, rows + 1), fields)
        start = time.monotonic()
        try:
            txn(ids)
        except Exception as exc:
            with lock:
                result.errors[type(exc).__name__] += 1
            continue
        spans.append((start, time.monotonic()))
    with lock:
        result.spans += spans
        if spans:
            result.clients.append((spans[0][0], spans[-1][1]))


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings (a process that appeared in between counts whole)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def run_kind(
    make: Callable[[], Callable[[list[int]], None]],
    result: Tps,
    args: argparse.Namespace,
    cpu: dict[str, CpuReader] | None = None,
) -> Tps:
    """Warm up, then ``result.concurrency`` threads for ``--duration`` seconds; ``cpu``'s parties are
    read before and after the window."""
    lock = threading.Lock()
    warm = Tps(result.mode, result.kind, result.concurrency)
    drive(make(), warm, args.rows, args.fields, time.monotonic() + args.warmup, lock)
    txns = [make() for _ in range(result.concurrency)]
    before = {party: read() for party, read in (cpu or {}).items()}
    start = time.monotonic()
    end = start + args.duration
    threads = [threading.Thread(target=drive, args=(txn, result, args.rows, args.fields, end, lock)) for txn in txns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.probed_s = time.monotonic() - start
    result.cpu_s = {party: cpu_used(before[party], read()) for party, read in (cpu or {}).items()}
    result.close_window()
    return result


def run_mode(
    engine: Engine,
    endpoint: Endpoint,
    mode: str,
    args: argparse.Namespace,
    cpu: dict[str, CpuReader] | None = None,
    round_: int = 0,
) -> list[Tps]:
    """Populate for ``mode``, then read and write transactions at every concurrency (``endpoint``: the
    FF1 key's for ``token``, the encryption key's otherwise); ``round_`` names the round of a report."""
    with ExitStack() as stack:
        data_key = None
        if mode == "envelope":
            with endpoint.client() as km:
                data_key = km.generate_data_key(endpoint.key).plaintext

        def cipher() -> Cipher:
            km = None if mode in ("plain", "envelope") else endpoint.client()
            if km is not None:
                stack.callback(km.close)
            return Cipher(mode, km, endpoint.key, data_key)

        populate(engine, cipher(), args.rows)
        results = []
        for concurrency in args.concurrency:
            for kind, txn in (("read", read_txn), ("write", write_txn)):

                def make(txn: Callable[..., None] = txn) -> Callable[[list[int]], None]:
                    c = cipher()
                    return lambda ids: txn(engine, c, ids)

                results.append(run_kind(make, Tps(mode, kind, concurrency, round_), args, cpu))
        return results


def process_cpu(pids: Sequence[int]) -> dict[int, float]:
    """User + system CPU seconds so far of each of ``pids`` that still runs."""
    found = {}
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        found[pid] = times.user + times.system
    return found


def database_backends(engine: Engine) -> list[int]:
    """The PostgreSQL backends connected to ``engine``'s database (this query's own included)."""
    with engine.connect() as conn:
        query = text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return [int(pid) for (pid,) in conn.execute(query)]


def cpu_readers(engine: Engine, service: Service) -> dict[str, CpuReader]:
    """The parties whose CPU a workload reports: this process, the key manager's processes when known,
    and the database's backends when it is a PostgreSQL server on this machine."""
    readers: dict[str, CpuReader] = {"app": lambda: process_cpu([os.getpid()])}
    if service.pid is not None:
        readers["keymanager"] = lambda: process_cpu(service.pids())
    if engine.dialect.name == "postgresql" and engine.url.host in ("127.0.0.1", "localhost", "::1", None):
        readers["database"] = lambda: process_cpu(database_backends(engine))
    return readers


@contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A new PostgreSQL database ``km_bench_app_<hex>`` on ``server_url``'s server for the block; its URL.
    Dropped afterwards (its connections closed by force)."""
    name = f"km_bench_app_{secrets.token_hex(4)}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def app_table(results: Sequence[Tps]) -> Table:
    """TPS per mode, kind and concurrency, with the loss against ``plain``."""
    table = Table(title="application scenario (sysbench-like): transactions per second", title_justify="left")
    for column in ("mode", "kind", "clients", "TPS", "overhead", "p50 ms", "p95 ms", "p99 ms", "errors"):
        table.add_column(column, justify="right")
    for r in results:
        base = next(
            (b for b in results if b.mode == "plain" and b.kind == r.kind and b.concurrency == r.concurrency), None
        )
        overhead = "—" if base is None or r is base or not base.tps else f"{(1 - r.tps / base.tps) * 100:.1f}%"
        dist = Distribution.of(r.latencies)
        errors = sum(r.errors.values())
        figures = (f"{r.tps:,.1f}", overhead, *(f"{v * 1e3:.2f}" for v in (dist.p50, r.p95, dist.p99)))
        table.add_row(r.mode, r.kind, str(r.concurrency), *figures, f"[bold red]{errors}[/]" if errors else "0")
    return table


def run(args: argparse.Namespace, console: Console) -> int:
    """Run every mode; print the TPS table; write ``app.json``; 1 on errors."""
    out = output.directory(args)
    url = args.db_url or f"sqlite:///{(out / 'app.db').resolve()}"
    engine = create_engine(url, connect_args={"timeout": 30} if url.startswith("sqlite") else {})
    results: list[Tps] = []
    try:
        with service_from(args) as service:
            endpoint, tokens = provision(service), provision_tokens(service)
            cpu = cpu_readers(engine, service)
            for mode in MODES:
                console.print(f"app: {mode} …")
                results += run_mode(engine, tokens if mode == "token" else endpoint, mode, args, cpu)
            env = environment.describe(service.url, service.ca, database=engine.dialect.name)
    finally:
        metadata.drop_all(engine)
        engine.dispose()
    console.print(app_table(results))
    errors = sum(sum(r.errors.values()) for r in results)
    document = {"ok": errors == 0, "errors_total": errors, "environment": env, "command": output.command_line()}
    output.save(out / "app.json", {**document, "results": [r.as_json() for r in results]})
    console.print(f"results: {out / 'app.json'}")
    return 1 if errors else 0
