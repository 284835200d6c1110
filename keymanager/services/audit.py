"""Writing the audit log with group commit.

Every request that touches a key or a principal waits for its audit record to be committed
before it answers (fail closed). One writer thread per process takes every record waiting
at that moment and appends them all in one transaction, then releases the waiting requests:
under load, one commit serves many requests, so the chain (single across processes, since
each append locks the chain head) does not become the throughput ceiling.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TypeAlias

from keymanager.db.audit import AuditStore
from keymanager.domain.audit import AuditEntry
from keymanager.errors import DatabaseUnavailable, KeyManagerError

log = logging.getLogger(__name__)

_Waiter: TypeAlias = "concurrent.futures.Future[int] | asyncio.Future[int]"
_Item: TypeAlias = tuple[AuditEntry, int | None, _Waiter]


class StaleMetadata(Exception):
    """The request used cached principals or keys, and they changed before its audit commit."""


class AuditLog:
    """Appends audit entries to the chain; :meth:`awrite` returns once the entry is committed.

    An entry may carry the metadata version its request relied on: at commit, if the version
    has moved on, the entry is not written and its writer gets :class:`StaleMetadata` (the
    request then checks again against the database and writes what really happened).
    """

    def __init__(self, store: AuditStore, *, max_batch: int = 1000, timeout: float = 30.0) -> None:
        self._store = store
        self._max_batch = max_batch
        self._timeout = timeout
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.batches = 0
        """Transactions committed by this process's writer (for tests and metrics)."""
        self.observer: Callable[[int], None] | None = None
        """Called with the queue depth when the writer takes a batch."""

    def submit(self, entry: AuditEntry, expected_version: int | None = None) -> concurrent.futures.Future[int]:
        """Queue ``entry``; the future gives the metadata version at commit, or the store's error,
        or StaleMetadata when ``expected_version`` is given and no longer current."""
        self._start()
        future: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._queue.put((entry, expected_version, future))
        return future

    async def awrite(self, entry: AuditEntry, expected_version: int | None = None) -> int:
        """Append ``entry`` and wait for the commit, with the optional version check of :meth:`submit`.

        The writer resolves the waiting requests of one event loop with one wake-up per commit.
        """
        self._start()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[int] = loop.create_future()
        self._queue.put((entry, expected_version, waiter))
        deadline = loop.call_later(self._timeout, _expire, waiter)  # fail closed if the writer is stuck
        try:
            return await waiter
        finally:
            deadline.cancel()

    def close(self) -> None:
        """Write what is queued, then stop the writer."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=self._timeout)

    def _start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            if self.observer is not None:
                with contextlib.suppress(Exception):  # a metrics failure must not stop the writer
                    self.observer(self._queue.qsize())
            self._commit(batch)
            if stop:
                return

    def _commit(self, batch: Sequence[_Item]) -> None:
        outcomes: list[tuple[_Waiter, int | BaseException]]
        try:
            version, accepted = self._store.append_current([(entry, expected) for entry, expected, _ in batch])
            self.batches += 1
            outcomes = [(w, version if ok else StaleMetadata()) for (_, _, w), ok in zip(batch, accepted, strict=True)]
        except KeyManagerError as exc:
            outcomes = [(w, exc) for _, _, w in batch]
        except Exception as exc:  # every failure must fail the waiting requests closed
            log.error("audit append failed: %s", type(exc).__name__)
            outcomes = [(w, DatabaseUnavailable("the audit record could not be written")) for _, _, w in batch]
        _resolve(outcomes)


def _resolve(outcomes: Sequence[tuple[_Waiter, int | BaseException]]) -> None:
    """Settle every waiter: thread futures directly, each event loop's futures in one call on that loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[int], int | BaseException]]] = {}
    for waiter, outcome in outcomes:
        if isinstance(waiter, asyncio.Future):
            by_loop.setdefault(waiter.get_loop(), []).append((waiter, outcome))
        elif isinstance(outcome, BaseException):
            waiter.set_exception(outcome)
        else:
            waiter.set_result(outcome)
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, settled)


def _expire(waiter: asyncio.Future[int]) -> None:
    if not waiter.done():
        waiter.set_exception(DatabaseUnavailable("the audit record could not be written in time"))


def _settle(settled: list[tuple[asyncio.Future[int], int | BaseException]]) -> None:
    for future, outcome in settled:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
