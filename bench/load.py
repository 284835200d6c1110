"""The load generator: client processes, each running threads with their own keep-alive clients.

A measurement is a ``Job`` split over ``procs`` processes of a persistent pool (spawned once per
run, so start-up is not measured). Every client thread opens its connection (its set-up, not
measured) and meets the others at a barrier that every client of the measurement and the parent
share; all warm up for ``warmup`` seconds and meet again, so that every client sends its first
measured request at the same moment, whatever its set-up and its last warm-up operation took;
then each measures until ``duration`` has passed or it has done its share of ``requests`` (at
least one iteration). Every measured operation is kept as its (start, end) on the system's
monotonic clock, which every process on the machine shares, so that ``bench.measure`` can find
the window in which every client was measuring.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import psutil

from bench.clients import Operation, TargetSpec

WARMUP_BYTES = 256 * 1024
"""Warm-up operations use at most this payload (a 70 MB warm-up would take longer than the run)."""
SETUP_DEADLINE = 120.0
"""Seconds every client of a measurement has to reach a barrier (set-up, warm-up) before the
measurement gives up."""
Span = tuple[float, float]
"""When an operation started and when its answer came (``time.monotonic()`` seconds)."""


@dataclass(frozen=True)
class Job:
    """What each load process runs: ``threads`` clients of ``target`` on ``size``-byte blobs.

    ``mode``: ``both`` (encrypt, then decrypt and compare, every iteration), ``encrypt`` (the last
    ciphertext of each thread is decrypted and compared after the window) or ``decrypt`` (one
    ciphertext per thread made before the window, decrypted and compared every iteration).
    ``clients`` counts the threads of every process; ``barrier`` (a manager's ``Barrier`` of
    ``clients + 1`` parties, the parent being the last) is met twice: when the set-up is done, and
    when the warm-up is.
    """

    target: TargetSpec
    size: int
    threads: int
    mode: str
    warmup: float
    duration: float | None
    requests: int | None
    clients: int = 1
    barrier: Any = None


@dataclass
class Tally:
    """What threads measured: the spans of their operations, errors by kind, checks, each client's span."""

    encrypt: list[Span] = field(default_factory=list)
    decrypt: list[Span] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    checked: int = 0
    clients: list[Span] = field(default_factory=list)
    """Per client that measured: the start of its first measured operation and the end of its last."""
    setup_s: float = 0.0
    """The longest set-up (opening its client) of these clients, in seconds: outside every window."""
    cpu_seconds: float = 0.0

    def merge(self, other: Tally) -> None:
        """Add ``other``'s figures to these."""
        self.encrypt += other.encrypt
        self.decrypt += other.decrypt
        self.errors.update(other.errors)
        self.checked += other.checked
        self.clients += other.clients
        self.setup_s = max(self.setup_s, other.setup_s)
        self.cpu_seconds += other.cpu_seconds


def same(payload: Any, plain: Any) -> bool:
    """True when a decryption gave back the payload (a list of fields for batches)."""
    if isinstance(payload, list):
        return [bytes(p) for p in payload] == [bytes(p) for p in plain]
    return bytes(payload) == bytes(plain)


class Worker:
    """One thread's client and loop."""

    def __init__(self, job: Job, measuring: threading.Event) -> None:
        self.job = job
        self.tally = Tally()
        self.measuring = measuring
        """Set when this thread's warm-up is over (or it gave up): its process's CPU is read from then."""

    def timed(self, op: Any, arg: Any, into: list[Span]) -> Any:
        """Run ``op(arg)``; its span goes to ``into``, a failure to the error counts (None)."""
        start = time.monotonic()
        try:
            result = op(arg)
        except Exception as exc:
            self.tally.errors[type(exc).__name__] += 1
            return None
        into.append((start, time.monotonic()))
        return result

    def check(self, payload: Any, plain: Any) -> None:
        """Compare a decryption with its payload; a difference counts as a ``mismatch`` error."""
        self.tally.checked += 1
        if not same(payload, plain):
            self.tally.errors["mismatch"] += 1

    def iteration(self, op: Operation, payload: Any, sealed: Any) -> Any:
        """One measured iteration of the job's mode; the latest ciphertext."""
        tally, mode = self.tally, self.job.mode
        if mode != "decrypt":
            sealed = self.timed(op.encrypt, payload, tally.encrypt)
        if mode != "encrypt" and sealed is not None:
            plain = self.timed(op.decrypt, sealed, tally.decrypt)
            if plain is not None:
                self.check(payload, plain)
        return sealed

    def warm_up(self, op: Operation, end: float) -> None:
        """Untimed operations on a small payload until ``end``."""
        payload = op.payload(min(self.job.size, WARMUP_BYTES))
        while time.monotonic() < end:
            try:
                op.decrypt(op.encrypt(payload))
            except Exception:
                time.sleep(0.05)

    def run(self) -> None:
        """Open the client, meet the others, warm up, meet them again, measure."""
        opening = time.monotonic()
        try:
            op = self.job.target.open(self.job.size)
            self.tally.setup_s = time.monotonic() - opening
        except Exception as exc:
            self.tally.errors[type(exc).__name__] += 1
            self.give_up()
            return
        try:
            payload = op.payload(self.job.size)
            sealed = self.timed(op.encrypt, payload, []) if self.job.mode == "decrypt" else None
            if not self.meet("set-up"):
                return
            self.warm_up(op, time.monotonic() + self.job.warmup)
            if not self.meet("warm-up"):
                return
            self.measuring.set()
            sealed = self.measure(op, payload, sealed, time.monotonic() + (self.job.duration or 0.0))
            if self.job.mode == "encrypt" and sealed is not None:
                self.check(payload, op.decrypt(sealed))
        except Exception as exc:
            self.tally.errors[type(exc).__name__] += 1
            self.give_up()
        finally:
            self.measuring.set()
            op.close()

    def meet(self, what: str) -> bool:
        """Wait at the barrier for every other client (``SETUP_DEADLINE``); False, an error counted,
        when it broke (another client failed, or the deadline passed)."""
        try:
            self.job.barrier.wait(SETUP_DEADLINE)
        except threading.BrokenBarrierError:
            self.tally.errors[f"{what} of the clients did not finish"] += 1
            return False
        return True

    def give_up(self) -> None:
        """Break the barrier, so that no other client waits for this one."""
        self.job.barrier.abort()
        self.measuring.set()

    def measure(self, op: Operation, payload: Any, sealed: Any, end: float) -> Any:
        """Iterate until ``end`` or this thread's share of requests is done (at least once)."""
        job = self.job
        count = 0
        while count == 0 or ((time.monotonic() < end) if job.requests is None else (count < job.requests)):
            sealed = self.iteration(op, payload, sealed) or sealed
            count += 1
        spans = self.tally.encrypt + self.tally.decrypt
        if spans:
            self.tally.clients.append((min(s for s, _ in spans), max(e for _, e in spans)))
        return sealed


def run_job(job: Job) -> Tally:
    """Run a job's threads in this process; their merged tally with this process's CPU seconds
    from the end of the warm-up on."""
    measuring = threading.Event()
    workers = [Worker(job, measuring) for _ in range(job.threads)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    me = psutil.Process()
    measuring.wait(2 * SETUP_DEADLINE + job.warmup)
    cpu = me.cpu_times()
    for thread in threads:
        thread.join()
    after = me.cpu_times()
    total = Tally(cpu_seconds=(after.user + after.system) - (cpu.user + cpu.system))
    for worker in workers:
        total.merge(worker.tally)
    return total


def ready() -> bool:
    """Import what jobs need, so that the first measurement does not pay for it."""
    import boto3  # noqa: F401
    import keymanager_sdk  # noqa: F401

    return True


class LoadPool:
    """A persistent pool of ``size`` client processes (spawned, not forked) and the manager process
    that holds each measurement's barrier."""

    def __init__(self, size: int) -> None:
        self.size = size
        context = multiprocessing.get_context("spawn")
        self.manager = context.Manager()
        self.executor = ProcessPoolExecutor(max_workers=size, mp_context=context)
        list(self.executor.map(_ready_and_wait, [0.3] * size))

    def submit(self, job: Job, concurrency: int) -> tuple[Any, list[Future[Tally]]]:
        """Split ``concurrency`` threads over the pool's processes and start them: the barrier the
        caller must wait at too (its last party), and the tallies to come."""
        procs = min(self.size, concurrency)
        shares = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
        requests = None if job.requests is None else max(1, job.requests // concurrency)
        barrier = self.manager.Barrier(concurrency + 1)
        jobs = [replace(job, threads=n, requests=requests, clients=concurrency, barrier=barrier) for n in shares]
        return barrier, [self.executor.submit(run_job, j) for j in jobs]

    def close(self) -> None:
        """Stop the client processes and the manager."""
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.manager.shutdown()


def _ready_and_wait(seconds: float) -> bool:
    """Pool warm-up task: import, then hold this process so every worker gets one task."""
    ready()
    time.sleep(seconds)
    return True
