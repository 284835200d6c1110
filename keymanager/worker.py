"""One thread serving a queue of jobs, with a deadline on every wait.

Some work must stay on one thread: every PKCS#11 call of a process (:mod:`keymanager.hsm.dispatch`)
and the audit writer's group commits (:mod:`keymanager.services.audit`). A :class:`Worker` owns
that thread. Callers hand it jobs from any thread (:meth:`Worker.call`) or await them from an
event loop (:meth:`Worker.acall`); the thread takes every job waiting at that moment (at most
``max_batch``) and gives them to ``serve``, which returns one result (or :class:`Failure`) per
job: all in one call (the audit writer's group commit), or one job per call when the worker
serves them ``separately`` (the HSM thread). Jobs awaited from an event loop are handed over once
per turn of that loop: the first of a turn schedules the hand-off (``call_soon``), the others join
it, and the thread is woken once for all of them, not once per request. Results reach a waiting
thread through a ``concurrent.futures.Future``, and each event loop through one
``call_soon_threadsafe`` per batch: one wake-up of the loop for every job served meanwhile,
instead of one per job. A batch
served separately holds its results back at most :data:`SETTLE_WITHIN` (plus the job running
then), so a slow job does not hold up the answers of the quick ones before it for long; a job
that never returns keeps the results it held back, whose callers then meet their deadlines as
its own caller does (the HSM being stuck, every caller of that moment answers 503).

Deadlines. Every wait ends by its deadline with :class:`DeadlineExceeded`, whatever the thread
does. A job whose deadline passed while it was still queued is never started (its caller has
already been told it failed); a job that is running cannot be stopped — a thread stuck in C
code cannot be interrupted — so :meth:`Worker.overdue` tells the owner how long the running
batch (or, served separately, the running job) is past its deadline, and the owner decides (the
HSM adapter refuses new calls at once and fails the waiting ones, queued or taken but not
started, with :meth:`Worker.fail_queued` instead of leaving them behind a stuck one). A job
served separately is checked against its deadline when it starts, not only when it is taken.

Shutdown. :meth:`Worker.close` serves what was queued before it, then stops the thread, waiting
at most its timeout. :class:`LastOutcome` keeps whether the last operation of a part failed, for
readiness.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

J = TypeVar("J")
R = TypeVar("R")

_Waiter = concurrent.futures.Future[Any] | asyncio.Future[Any]

SETTLE_WITHIN = 0.001
"""Seconds a batch served separately may hold back results before it settles them (checked as each
job starts): one loop wake-up per millisecond at most, and answers late by at most that much."""


class DeadlineExceeded(TimeoutError):
    """The job did not finish by its deadline (it may still be running, or was never started)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """What ``serve`` returns for a job that failed: ``error`` is raised to that job's caller."""

    error: BaseException


class _Job(NamedTuple, Generic[J]):
    work: J
    deadline: float
    waiter: _Waiter


class Worker(Generic[J, R]):
    """A thread named ``name`` that runs ``serve`` on batches of jobs (see the module docstring).

    ``serve`` runs on the worker thread only and returns one result or :class:`Failure` per
    job, in order; an exception escaping ``serve`` fails every job it was given with it. It is
    given up to ``max_batch`` jobs at once, or one at a time when ``separately``. The thread
    starts with the first job. ``clock`` gives the seconds deadlines are read in (a test's clock
    may stand in for ``time.monotonic``; the waits themselves are timeouts of real seconds).
    """

    def __init__(
        self,
        name: str,
        serve: Callable[[Sequence[J]], Sequence[R | Failure]],
        *,
        max_batch: int = 1,
        separately: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = name
        self._clock = clock
        self._serve = serve
        self._max_batch = max_batch
        self._separately = separately
        self._queue: queue.SimpleQueue[list[_Job[J]] | _Job[J] | None] = queue.SimpleQueue()
        self._turns: dict[asyncio.AbstractEventLoop, list[_Job[J]]] = {}
        """Per event loop, the jobs of its current turn not yet handed over (each loop's own only)."""
        self._held: deque[_Job[J]] = deque()
        """Jobs the thread took from the queue and has not batched yet (a turn's beyond ``max_batch``)."""
        self._taken: deque[_Job[J]] = deque()
        """Jobs of the batch being served separately that have not started (popped by one side only)."""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running_deadline: float | None = None

    # -- callers ----------------------------------------------------------------------
    def here(self) -> bool:
        """True on the worker thread itself (where waiting for a job would dead-lock)."""
        return threading.current_thread() is self._thread

    def pending(self) -> int:
        """Jobs waiting in the queue, in an event loop's turn or taken and not started (approximate:
        a turn's jobs queued together count once)."""
        turns = sum(len(jobs) for jobs in list(self._turns.values()))
        return self._queue.qsize() + len(self._held) + len(self._taken) + turns

    def overdue(self) -> float:
        """Seconds the running batch is past its last caller's deadline (a job served separately: past
        its own); 0.0 when none is."""
        deadline = self._running_deadline
        return 0.0 if deadline is None else max(0.0, self._clock() - deadline)

    def submit(self, work: J, timeout: float) -> concurrent.futures.Future[R]:
        """Queue ``work``; the future gives its result or error. It is never started after ``timeout`` s."""
        future: concurrent.futures.Future[R] = concurrent.futures.Future()
        self._put(_Job(work, self._clock() + timeout, future))
        return future

    def call(self, work: J, timeout: float) -> R:
        """Run ``work`` and return its result (or raise its error); DeadlineExceeded after ``timeout`` s."""
        try:
            return self.submit(work, timeout).result(timeout)
        except concurrent.futures.TimeoutError:
            raise DeadlineExceeded() from None

    async def acall(self, work: J, timeout: float) -> R:
        """:meth:`call` for an event loop, which goes on meanwhile."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[R] = loop.create_future()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = []
            loop.call_soon(self._hand_over, loop)
        turn.append(_Job(work, self._clock() + timeout, waiter))
        expiry = loop.call_later(timeout, _expire, waiter)
        try:
            return await waiter
        finally:
            expiry.cancel()

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``, once its turn is over: its jobs of the turn to the thread, in one put."""
        jobs = self._turns.pop(loop, [])
        if len(jobs) == 1:
            self._put(jobs[0])
        elif jobs:
            self._put(jobs)

    def fail_queued(self) -> int:
        """Fail every job still waiting (queued, or taken and not started) with DeadlineExceeded;
        returns how many.

        For an owner that found the thread stuck (:meth:`overdue`): its callers need not wait for
        their own deadlines behind a job that may never end.
        """
        failed: list[_Job[J]] = []
        for waiting in (self._taken, self._held):
            while True:
                try:
                    failed.append(waiting.popleft())
                except IndexError:
                    break
        stop = False
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stop = True
            elif isinstance(item, list):
                failed.extend(item)
            else:
                failed.append(item)
        if stop:
            self._queue.put(None)
        _settle([(job.waiter, Failure(DeadlineExceeded())) for job in failed])
        return len(failed)

    def close(self, timeout: float) -> bool:
        """Serve what is queued, then stop the thread; True when it stopped within ``timeout`` s."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return True
        self._queue.put(None)
        thread.join(timeout)
        return not thread.is_alive()

    def _put(self, job: list[_Job[J]] | _Job[J]) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
        self._queue.put(job)

    # -- the worker thread --------------------------------------------------------------
    def _run(self) -> None:
        stopping = False
        while True:
            if not self._held:
                if stopping:
                    return
                first = self._queue.get()
                if first is None:
                    return
                self._hold(first)
            batch, stop = self._take(read=not stopping)
            stopping = stopping or stop
            if not batch:  # what was held was failed meanwhile (fail_queued)
                continue
            if self._separately:
                self._serve_separately(batch)
            else:
                self._serve_batch(batch)

    def _hold(self, item: list[_Job[J]] | _Job[J]) -> None:
        if isinstance(item, list):
            self._held.extend(item)
        else:
            self._held.append(item)

    def _take(self, read: bool) -> tuple[list[_Job[J]], bool]:
        """Up to ``max_batch`` jobs: those held (a turn's jobs beyond the last batch), then (when
        ``read``) those waiting now; and whether the queue said to stop after what it held."""
        taken: list[_Job[J]] = []
        stop = False
        while len(taken) < self._max_batch:
            if not self._held:
                if not read or stop:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                self._hold(item)
            try:
                taken.append(self._held.popleft())
            except IndexError:  # failed meanwhile by fail_queued
                break
        return taken, stop

    def _serve_separately(self, batch: list[_Job[J]]) -> None:
        """Serve each job on its own, unless its deadline has passed; settle the results together."""
        taken = self._taken
        taken.extend(batch)
        outcomes: list[tuple[_Waiter, Any]] = []
        settle_by = 0.0
        while True:
            try:
                job = taken.popleft()
            except IndexError:
                break
            now = self._clock()
            if outcomes and now >= settle_by:
                _settle(outcomes)
                outcomes = []
            if job.deadline <= now:
                outcome: R | Failure = Failure(DeadlineExceeded())
            else:
                self._running_deadline = job.deadline
                try:
                    outcome = self._serve((job.work,))[0]
                except BaseException as exc:  # handed to the caller, whatever it is
                    outcome = Failure(exc)
                finally:
                    self._running_deadline = None
            if not isinstance(job.waiter, asyncio.Future):  # a waiting thread gains nothing by waiting longer
                _settle(((job.waiter, outcome),))
                continue
            if not outcomes:
                settle_by = now + SETTLE_WITHIN
            outcomes.append((job.waiter, outcome))
        if outcomes:
            _settle(outcomes)

    def _serve_batch(self, batch: list[_Job[J]]) -> None:
        """Serve the jobs whose deadline has not passed in one call; settle every waiter."""
        now = self._clock()
        expired = [job for job in batch if job.deadline <= now]
        if expired:
            _settle([(job.waiter, Failure(DeadlineExceeded())) for job in expired])
            batch = [job for job in batch if job.deadline > now]
            if not batch:
                return
        self._running_deadline = max(job.deadline for job in batch)
        try:
            results: Sequence[R | Failure] = self._serve([job.work for job in batch])
        except BaseException as exc:  # handed to every caller of the batch, whatever it is
            results = [Failure(exc)] * len(batch)
        finally:
            self._running_deadline = None
        _settle([(job.waiter, result) for job, result in zip(batch, results, strict=True)])


def serve_each(jobs: Sequence[Callable[[], R]]) -> list[R | Failure]:
    """A ``serve`` for jobs that are callables: each one's result, or its error as a Failure."""
    results: list[R | Failure] = []
    for job in jobs:
        try:
            results.append(job())
        except BaseException as exc:  # handed to the caller, whatever it is
            results.append(Failure(exc))
    return results


def _settle(outcomes: Sequence[tuple[_Waiter, Any]]) -> None:
    """Settle every waiter: thread futures directly, each event loop's futures in one call on that loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
    for waiter, outcome in outcomes:
        if isinstance(waiter, asyncio.Future):
            by_loop.setdefault(waiter.get_loop(), []).append((waiter, outcome))
        elif not waiter.done():
            _set(waiter, outcome)
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle_on_loop, settled)


def _settle_on_loop(settled: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for future, outcome in settled:
        if future.done():  # expired meanwhile
            continue
        if isinstance(outcome, Failure):
            future.set_exception(outcome.error)
        else:
            future.set_result(outcome)


def _set(waiter: _Waiter, outcome: Any) -> None:
    # A thread future may have been cancelled by its caller meanwhile: nobody waits then.
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if isinstance(outcome, Failure):
            waiter.set_exception(outcome.error)
        else:
            waiter.set_result(outcome)


def _expire(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(DeadlineExceeded())


class LastOutcome:
    """Whether the last operation of one part (the HSM, the audit log) failed, and none succeeded since.

    Written from any thread (two racing writers only reorder two outcomes of the same moment);
    read by readiness.
    """

    def __init__(self) -> None:
        self.failing = False
        """True when the last recorded operation failed."""

    def succeeded(self) -> None:
        """Record a successful operation."""
        self.failing = False

    def failed(self) -> None:
        """Record a failed operation."""
        self.failing = True
