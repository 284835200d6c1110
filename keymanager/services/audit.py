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
import logging
import queue
import threading
from collections.abc import Callable, Sequence

from keymanager.db.audit import AuditStore
from keymanager.domain.audit import AuditEntry
from keymanager.errors import DatabaseUnavailable, KeyManagerError

log = logging.getLogger(__name__)

_Item = tuple[AuditEntry, "concurrent.futures.Future[None]"]


class AuditLog:
    """Appends audit entries to the chain; :meth:`write` returns once the entry is committed."""

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

    def submit(self, entry: AuditEntry) -> concurrent.futures.Future[None]:
        """Queue ``entry``; the future resolves when it is committed, or fails with the store's error."""
        self._start()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._queue.put((entry, future))
        return future

    def write(self, entry: AuditEntry) -> None:
        """Append ``entry`` and wait for the commit; raises DatabaseUnavailable when it cannot be written."""
        try:
            self.submit(entry).result(timeout=self._timeout)
        except concurrent.futures.TimeoutError:
            raise DatabaseUnavailable("the audit record could not be written") from None

    async def awrite(self, entry: AuditEntry) -> None:
        """:meth:`write` for the event loop."""
        try:
            await asyncio.wait_for(asyncio.wrap_future(self.submit(entry)), self._timeout)
        except TimeoutError:
            raise DatabaseUnavailable("the audit record could not be written") from None

    def depth(self) -> int:
        """Entries waiting for the writer."""
        return self._queue.qsize()

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
                self.observer(self._queue.qsize())
            self._commit(batch)
            if stop:
                return

    def _commit(self, batch: Sequence[_Item]) -> None:
        error: BaseException | None = None
        try:
            self._store.append([entry for entry, _ in batch])
            self.batches += 1
        except KeyManagerError as exc:
            error = exc
        except Exception as exc:  # any other failure must still fail the waiting requests closed
            log.error("audit append failed: %s", type(exc).__name__)
            error = DatabaseUnavailable("the audit record could not be written")
        for _, future in batch:
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
