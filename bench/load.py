"""The load generator: client processes, each running threads with their own keep-alive clients.

A measurement is a ``Job`` split over ``procs`` processes of a persistent pool (spawned once per
run, so start-up is not measured). Every process waits for the same wall-clock start, warms up
for ``warmup`` seconds, then measures until the window closes (``duration``) or each thread has
done its share of ``requests``. An operation that starts inside the window is counted whole.
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
START_MARGIN = 0.3


@dataclass(frozen=True)
class Job:
    """What each load process runs: ``threads`` clients of ``target`` on ``size``-byte blobs.

    ``mode``: ``both`` (encrypt, then decrypt and compare, every iteration), ``encrypt`` (the last
    ciphertext of each thread is decrypted and compared after the window) or ``decrypt`` (one
    ciphertext per thread made before the window, decrypted and compared every iteration).
    """

    target: TargetSpec
    size: int
    threads: int
    mode: str
    start_at: float
    warmup: float
    duration: float | None
    requests: int | None


@dataclass
class Tally:
    """What threads measured: latencies (seconds), errors by kind, checks, window ends."""

    encrypt: list[float] = field(default_factory=list)
    decrypt: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    checked: int = 0
    last_end: float = 0.0
    cpu_seconds: float = 0.0

    def merge(self, other: Tally) -> None:
        """Add ``other``'s figures to these."""
        self.encrypt += other.encrypt
        self.decrypt += other.decrypt
        self.errors.update(other.errors)
        self.checked += other.checked
        self.last_end = max(self.last_end, other.last_end)
        self.cpu_seconds += other.cpu_seconds


def same(payload: Any, plain: Any) -> bool:
    """True when a decryption gave back the payload (a list of fields for batches)."""
    if isinstance(payload, list):
        return [bytes(p) for p in payload] == [bytes(p) for p in plain]
    return bytes(payload) == bytes(plain)


class Worker:
    """One thread's client and loop."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.tally = Tally()
        self.lock = threading.Lock()

    def timed(self, op: Any, arg: Any, into: list[float]) -> Any:
        """Run ``op(arg)``; its latency goes to ``into``, a failure to the error counts (None)."""
        start = time.perf_counter()
        try:
            result = op(arg)
        except Exception as exc:
            self.tally.errors[type(exc).__name__] += 1
            return None
        into.append(time.perf_counter() - start)
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

    def warm_up(self, op: Operation) -> None:
        """Untimed operations on a small payload until the warm-up ends."""
        payload = op.payload(min(self.job.size, WARMUP_BYTES))
        end = self.job.start_at + self.job.warmup
        while time.time() < end:
            try:
                op.decrypt(op.encrypt(payload))
            except Exception:
                time.sleep(0.05)

    def run(self) -> None:
        """Open the client, wait for the start, warm up, measure."""
        op = self.job.target.open(self.job.size)
        try:
            payload = op.payload(self.job.size)
            sealed = self.timed(op.encrypt, payload, []) if self.job.mode == "decrypt" else None
            time.sleep(max(0.0, self.job.start_at - time.time()))
            self.warm_up(op)
            sealed = self.measure(op, payload, sealed)
            if self.job.mode == "encrypt" and sealed is not None:
                self.check(payload, op.decrypt(sealed))
        except Exception as exc:
            self.tally.errors[type(exc).__name__] += 1
        finally:
            op.close()

    def measure(self, op: Operation, payload: Any, sealed: Any) -> Any:
        """Iterate until the window closes or this thread's share of requests is done (at least once)."""
        job = self.job
        end = job.start_at + job.warmup + (job.duration or 0.0)
        count = 0
        while count == 0 or ((time.time() < end) if job.requests is None else (count < job.requests)):
            sealed = self.iteration(op, payload, sealed) or sealed
            count += 1
        self.tally.last_end = time.time()
        return sealed


def run_job(job: Job) -> Tally:
    """Run a job's threads in this process; their merged tally with this process's CPU seconds."""
    workers = [Worker(job) for _ in range(job.threads)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    me = psutil.Process()
    time.sleep(max(0.0, job.start_at + job.warmup - time.time()))
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
    """A persistent pool of ``size`` client processes (spawned, not forked)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.executor = ProcessPoolExecutor(max_workers=size, mp_context=multiprocessing.get_context("spawn"))
        list(self.executor.map(_ready_and_wait, [0.3] * size))

    def submit(self, job: Job, concurrency: int) -> list[Future[Tally]]:
        """Split ``concurrency`` threads over the pool's processes and start them; their tallies to come."""
        procs = min(self.size, concurrency)
        shares = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
        requests = None if job.requests is None else max(1, job.requests // concurrency)
        jobs = [replace(job, threads=n, requests=requests) for n in shares]
        return [self.executor.submit(run_job, j) for j in jobs]

    def close(self) -> None:
        """Stop the client processes."""
        self.executor.shutdown(wait=True, cancel_futures=True)


def _ready_and_wait(seconds: float) -> bool:
    """Pool warm-up task: import, then hold this process so every worker gets one task."""
    ready()
    time.sleep(seconds)
    return True


def start_time() -> float:
    """The wall-clock start for a job submitted now."""
    return time.time() + START_MARGIN
