"""``python -m bench tokenize``: card-number tokens through the service, beside SoftHSM's own AES rate.

One run, three measurements, one after the other:

* **SoftHSM single-block AES** (``aes_block`` of :mod:`bench.ceilings`: one 16-byte ECB
  encryption per PKCS#11 call, one process per core at once, summed), in the installation's own
  SoftHSM token (``--spawn``, the default) or in a throwaway ``keymanager init`` home (``--url``).
  Divided by the PKCS#11 calls per token, it is the most tokens/s SoftHSM allows on this machine.
* **sequential**: one SDK client, one ``tokenize`` call (one request) per card number, for
  ``--duration`` seconds after ``--warmup``.
* **batches of 100**: ``--clients`` SDK clients at once (default: the service's workers), each
  sending ``tokenize_batch`` of ``--batch`` card numbers, for ``--duration`` seconds.

The key is an ``FF1_AES_256`` key created through the SDK with ``{"keep_last": 4, "luhn":
"valid"}``; the values are random Luhn-valid 16-digit card numbers. Every token is checked
(16 digits, the same last four, Luhn-valid), and a sample is detokenized and compared. The goal
(issue 15): batches reach at least 40 % of the ceiling. The load average is recorded beside each
phase: on a shared machine it says how far to trust the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from keymanager_sdk import KeyManager, Policy, Token
from rich.console import Console
from rich.table import Table

from bench.ceilings import hsm_ceilings
from bench.environment import describe
from bench.output import command_line, directory, save
from bench.rig import token_value
from bench.service import Endpoint, Service, init_home, serve

CARD_FORMAT = {"keep_last": 4, "luhn": "valid"}
CALLS_PER_TOKEN = 10
"""PKCS#11 calls per card token. The bench never imports the server package, so this is a constant:
FF1 has 10 Feistel rounds (``ROUNDS`` in keymanager/domain/ff1.py), each round's PRF is one
``CKM_AES_CBC`` call (keymanager/hsm/tokenization.py), and a token is exactly one FF1 call — the
Luhn rule sets a free digit instead of cycle-walking (docs/tokenization.md)."""
GOAL = 0.40
"""Batches must reach this fraction of the SoftHSM ceiling (issue 15)."""
SAMPLE = 20
"""Card numbers detokenized after the measurements and compared with the originals."""


def luhn_residue(digits: str) -> int:
    """The Luhn sum of ``digits`` mod 10 (0: the check passes)."""
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = int(char) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10


def card_numbers(count: int, seed: int = 15) -> list[str]:
    """``count`` random Luhn-valid 16-digit card numbers starting with 4."""
    rng = random.Random(seed)  # noqa: S311 (test data, not secrets)
    cards = []
    for _ in range(count):
        body = "4" + "".join(rng.choice("0123456789") for _ in range(14))
        cards.append(body + str((10 - luhn_residue(body + "0")) % 10))
    return cards


def is_token_of(token: str, card: str) -> bool:
    """Whether ``token`` has the shape the format promises for ``card``."""
    return len(token) == 16 and token.isdigit() and token[-4:] == card[-4:] and luhn_residue(token) == 0


def wrong(results: list[Token | Any], cards: list[str]) -> int:
    """How many of a batch's results are not a token of the right shape for their card number."""
    return sum(not (isinstance(t, Token) and is_token_of(t.token, c)) for t, c in zip(results, cards, strict=True))


# -- the service ------------------------------------------------------------------------------
@contextmanager
def installation() -> Iterator[tuple[Path, str]]:
    """A temporary ``keymanager init`` home and its SoftHSM user PIN (removed afterwards): the token of
    the SoftHSM measurement, and the installation served when no ``--url`` is given."""
    home = Path(tempfile.mkdtemp(prefix="km-bench-tokenize-"))
    try:
        _, pin = init_home(home)
        yield home, pin
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def service_of(args: argparse.Namespace, home: Path, pin: str) -> Iterator[Service]:
    """The service under test: ``--url`` (with ``--token``), else one served from ``home``."""
    if args.url:
        if not args.token:
            raise SystemExit("--url needs --token (an admin token, or @FILE)")
        yield Service(url=args.url, ca=args.ca, admin_token=token_value(args.token), workers=None)
        return
    with serve(home, home / "var", pin, args.workers) as service:
        yield service


def provision_tokens(service: Service) -> Endpoint:
    """A bench principal and an FF1 key with the card format, tokenize and detokenize granted to it."""
    suffix = secrets.token_hex(4)
    name = f"bench-tok-{suffix}"
    with KeyManager(service.url, token=service.admin_token, ca=service.ca) as admin:
        app = admin.create_principal(name, "app")
        admin.create_token_key(name, CARD_FORMAT, policy=Policy(tokenize=(name,), detokenize=(name,)))
    return Endpoint(url=service.url, key=name, ca=service.ca, token=app.token)


# -- the measurements -------------------------------------------------------------------------
def timed(seconds: float, step: Callable[[int], tuple[int, int]]) -> tuple[int, int, float]:
    """Call ``step(i)`` (→ tokens made, bad results) until ``seconds`` passed; (tokens, bad, elapsed)."""
    done = bad = i = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        made, wrong = step(i)
        done, bad, i = done + made, bad + wrong, i + 1
    return done, bad, elapsed


def sequential(endpoint: Endpoint, cards: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """One client, one ``tokenize`` request per card number."""
    with endpoint.client() as km:

        def step(i: int) -> tuple[int, int]:
            card = cards[i % len(cards)]
            return 1, 0 if is_token_of(km.tokenize(endpoint.key, card).token, card) else 1

        timed(args.warmup, step)
        load = os.getloadavg()[0]
        tokens, bad, seconds = timed(args.duration, step)
    return phase(tokens, bad, seconds, clients=1, load=[load, os.getloadavg()[0]])


def batched(endpoint: Endpoint, cards: list[str], args: argparse.Namespace, clients: int) -> dict[str, Any]:
    """``clients`` clients at once, each sending ``tokenize_batch`` of ``args.batch`` card numbers."""
    barrier, results, failures = threading.Barrier(clients + 1), [], []
    ring = cards + cards[: args.batch]  # any window of ``args.batch`` wraps around

    def client(number: int) -> None:
        try:
            with endpoint.client() as km:

                def step(i: int) -> tuple[int, int]:
                    start = (number * 7919 + i * args.batch) % len(cards)
                    chunk = ring[start : start + args.batch]
                    out = km.tokenize_batch(endpoint.key, chunk)
                    return len(out), wrong(out, chunk)

                timed(args.warmup, step)
                barrier.wait(timeout=120)
                results.append(timed(args.duration, step))
        except Exception as exc:  # reported below
            barrier.abort()
            failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    with suppress(threading.BrokenBarrierError):  # a client failed: reported after the join
        barrier.wait(timeout=120)
    load = os.getloadavg()[0]
    for thread in threads:
        thread.join(timeout=args.duration + 300)
    if failures or len(results) != clients:
        raise RuntimeError(f"a batch client failed: {failures}")
    tokens, bad = sum(r[0] for r in results), sum(r[1] for r in results)
    return phase(tokens, bad, max(r[2] for r in results), clients, [load, os.getloadavg()[0]])


def phase(tokens: int, bad: int, seconds: float, clients: int, load: list[float]) -> dict[str, Any]:
    """A phase's figures as JSON."""
    return {
        "tokens": tokens,
        "bad_tokens": bad,
        "seconds": seconds,
        "clients": clients,
        "tokens_per_s": tokens / seconds,
        "load_average": load,
    }


def round_trip(endpoint: Endpoint, cards: list[str]) -> bool:
    """Whether a sample of card numbers comes back from their tokens (a batch each way)."""
    sample = cards[:SAMPLE]
    with endpoint.client() as km:
        made = km.tokenize_batch(endpoint.key, sample)
        tokens = [t.token for t in made if isinstance(t, Token)]
        back = km.detokenize_batch(endpoint.key, tokens) if len(tokens) == len(sample) else []
    return back == sample


def ceiling(conf: Path, pin: str, seconds: float) -> dict[str, Any]:
    """SoftHSM's single-block AES rate (all cores and one process) and the token ceilings it implies."""
    processes = os.cpu_count() or 1
    load = os.getloadavg()[0]
    hsm = hsm_ceilings(conf, "km-bench", pin, processes, seconds, only=("aes_block",))
    return {
        "aes_block_per_s": hsm["aes_block"],
        "aes_block_per_s_per_process": hsm["aes_block_per_process"],
        "processes": processes,
        "calls_per_token": CALLS_PER_TOKEN,
        "tokens_per_s": hsm["aes_block"] / CALLS_PER_TOKEN,
        "tokens_per_s_one_process": hsm["aes_block_per_process"] / CALLS_PER_TOKEN,
        "load_average": [load, os.getloadavg()[0]],
    }


def measure(args: argparse.Namespace, step: Callable[[str], None]) -> dict[str, Any]:
    """The ceiling, then sequential, then batches, then the round-trip check."""
    cards = card_numbers(args.cards)
    with installation() as (home, pin):
        step("SoftHSM single-block AES (bench.ceilings aes_block)")
        found: dict[str, Any] = {"ceiling": ceiling(home / "var" / "softhsm2.conf", pin, args.hsm_seconds)}
        with service_of(args, home, pin) as service:
            endpoint = provision_tokens(service)
            clients = args.clients or service.workers or (os.cpu_count() or 1)
            step("tokenize, one request per card number")
            found["sequential"] = sequential(endpoint, cards, args)
            step(f"tokenize, batches of {args.batch}, {clients} clients")
            found["batches"] = batched(endpoint, cards, args, clients)
            found["round_trip_ok"] = round_trip(endpoint, cards)
            found["service_workers"] = service.workers
    top = found["ceiling"]["tokens_per_s"]
    for name in ("sequential", "batches"):
        found[name]["fraction_of_ceiling"] = found[name]["tokens_per_s"] / top
    met = found["batches"]["fraction_of_ceiling"] >= GOAL
    found["goal"] = {"batches_fraction_of_ceiling_at_least": GOAL, "met": met}
    return found


# -- output -----------------------------------------------------------------------------------
def table(found: dict[str, Any], batch: int) -> Table:
    """Tokens/s per phase beside the SoftHSM ceiling, and the verdict for batches."""
    top = found["ceiling"]
    shown = Table(title=f"FF1 card tokens (keep_last 4, luhn valid), {top['calls_per_token']} PKCS#11 calls per token")
    for column in ("measurement", "tokens/s", "of ceiling", "goal", "load avg (1 min)"):
        shown.add_column(column, justify="left" if column == "measurement" else "right")
    load = "{:.1f} → {:.1f}"
    shown.add_row(
        f"SoftHSM aes_block ÷ {top['calls_per_token']} ({top['processes']} processes)",
        f"{top['tokens_per_s']:,.0f}",
        f"{1:.0%}",
        "",
        load.format(*top["load_average"]),
    )
    goal = found["goal"]
    rows = [("sequential, 1 client, 1 request per token", found["sequential"], "")]
    verdict = f"≥ {GOAL:.0%}: {'met' if goal['met'] else 'NOT met'}"
    rows.append((f"batches of {batch}, {found['batches']['clients']} clients", found["batches"], verdict))
    for name, figures, text in rows:
        shown.add_row(
            name,
            f"{figures['tokens_per_s']:,.0f}",
            f"{figures['fraction_of_ceiling']:.0%}",
            text,
            load.format(*figures["load_average"]),
        )
    return shown


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure, print the table, write ``tokenize.json``; 1 when a token was wrong or did not come back."""
    out = directory(args)
    found = measure(args, lambda what: console.print(f"[dim]… {what}[/dim]"))
    console.print(table(found, args.batch))
    bad = found["sequential"]["bad_tokens"] + found["batches"]["bad_tokens"]
    trip = "ok" if found["round_trip_ok"] else "FAILED"
    console.print(f"wrong tokens: {bad}; round trip of {SAMPLE} card numbers: {trip}")
    environment = describe(
        url=args.url, ca=args.ca, service_spawned=not args.url, load_generator={"driver": "sdk threads"}
    )
    save(out / "tokenize.json", {"command": command_line(), "environment": environment, **found})
    console.print(f"written: {out / 'tokenize.json'}")
    return 0 if bad == 0 and found["round_trip_ok"] else 1


def add_parser(commands: Any) -> None:
    """The ``tokenize`` subcommand."""
    c = commands.add_parser("tokenize", help="FF1 card tokens/s, sequential and in batches, vs SoftHSM's AES rate")
    c.add_argument("--workers", type=int, default=2, help="workers of the spawned service (default 2)")
    c.add_argument("--url", help="a running service instead of a spawned one, e.g. https://127.0.0.1:8443")
    c.add_argument("--token", help="an ADMIN token of --url (or @FILE); the bench creates its own principal and key")
    c.add_argument("--ca", help="CA bundle of --url")
    c.add_argument("--duration", type=float, default=5.0, help="measured seconds per phase (default 5)")
    c.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each phase (default 1)")
    c.add_argument("--batch", type=int, default=100, help="card numbers per batch (default 100)")
    c.add_argument("--clients", type=int, help="clients of the batch phase (default: the service's workers)")
    c.add_argument("--cards", type=int, default=10_000, help="distinct card numbers cycled through (default 10000)")
    c.add_argument("--hsm-seconds", type=float, default=2.0, help="seconds of the SoftHSM measurement (default 2)")
    c.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    c.set_defaults(func=run)
