"""The audit log's writer (group commit) and its reader.

Every request that touches a key or a principal waits for its audit record to be committed
before it answers (fail closed). A writer thread (a *lane*) takes every record waiting for it
at that moment and appends them all to its own chain in one transaction, then releases the
waiting requests: under load, one commit serves many requests. A process has ``lanes`` of them,
each with its chain (``db/audit_writer.py`` ``ChainWriter``): no lane waits for another, in this
process or any other, and while one lane waits for its commit to reach the disk, the next
records go to a lane that is not committing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TypeAlias

from keymanager.db.audit import AuditRecords
from keymanager.domain.audit import AuditEntry, AuditQuery, AuditRecord, Outcome, Verification
from keymanager.errors import DatabaseUnavailable, HsmUnavailable, KeyManagerError, KeyMaterialMissing
from keymanager.worker import DeadlineExceeded, Failure, LastOutcome, Worker

log = logging.getLogger(__name__)

_Item: TypeAlias = tuple[AuditEntry, int | None]

PROBE_ACTION = "service.readiness_probe"
"""The action of the record readiness writes to learn whether the audit log takes writes again."""


def _nothing() -> None:
    pass


class StaleMetadata(Exception):
    """The request used cached principals or keys, and they changed before its audit commit."""


_Append: TypeAlias = Callable[[Sequence[_Item]], tuple[int, list[bool]]]


class _Lane:
    """One writer thread and the chain it appends to (through ``append``)."""

    def __init__(self, name: str, append: _Append, owner: AuditWriter, max_batch: int) -> None:
        self.append = append
        self.owner = owner
        self.committing = False
        self.worker: Worker[_Item, int] = Worker(name, self._commit, max_batch=max_batch)

    def _commit(self, batch: Sequence[_Item]) -> list[int | Failure]:
        self.committing = True
        try:
            return self.owner._commit(self, batch)
        finally:
            self.committing = False


class AuditWriter:
    """Appends audit entries to the log; :meth:`awrite` returns once the entry is committed.

    An entry may carry the metadata version its request relied on: at commit, if the version
    has moved on, the entry is not written and its writer gets :class:`StaleMetadata` (the
    request then checks again against the database and writes what really happened).
    A write not committed within ``timeout`` seconds fails with DatabaseUnavailable (fail closed).
    ``lanes`` writer threads commit side by side, each to a chain of its own.
    """

    def __init__(self, records: AuditRecords, *, max_batch: int = 1000, timeout: float = 30.0, lanes: int = 1) -> None:
        if lanes < 1:
            raise ValueError("an audit writer needs at least one lane")
        self._records = records
        self._timeout = timeout
        first = _Lane("audit-writer", lambda batch: records.append_current(batch), self, max_batch)
        more = [records.writer() for _ in range(lanes - 1)]
        self._more_chains = more
        self._lanes = [first] + [
            _Lane(f"audit-writer-{n}", writer.append_current, self, max_batch) for n, writer in enumerate(more, 1)
        ]
        self.batches = 0
        """Transactions committed by this process's lanes (for tests and metrics)."""
        self._count_lock = threading.Lock()
        self.outcome = LastOutcome()
        """Whether the last commit failed (or timed out) and none succeeded since."""
        self.observer: Callable[[int], None] | None = None
        """Called with the queue depth when the writer takes a batch."""
        self.on_failure: Callable[[], None] = _nothing
        """Called for each record :meth:`awrite` could not write (its request fails closed)."""

    @property
    def chains(self) -> list[int]:
        """The chains this process's lanes have written so far."""
        chains = [self._records.writer_chain, *(writer.chain for writer in self._more_chains)]
        return [chain for chain in chains if chain is not None]

    async def awrite(self, entry: AuditEntry, expected_version: int | None = None) -> int:
        """Append ``entry`` and wait for the commit: the metadata version at commit, or the store's
        error, or StaleMetadata when ``expected_version`` is given and no longer current.

        The entry goes to the lane with the fewest records waiting, one not committing first. A
        lane resolves the waiting requests of one event loop with one wake-up per commit.
        """
        try:
            return await self._lane().worker.acall((entry, expected_version), self._timeout)
        except StaleMetadata:
            raise
        except DeadlineExceeded:
            self.outcome.failed()
            self.on_failure()
            raise DatabaseUnavailable("the audit record could not be written in time") from None
        except Exception:
            self.on_failure()
            raise

    def _lane(self) -> _Lane:
        lanes = self._lanes
        if len(lanes) == 1:
            return lanes[0]
        return min(lanes, key=lambda lane: (lane.committing, lane.worker.pending()))

    def probe(self, timeout: float) -> None:
        """Write one readiness-probe record; DatabaseUnavailable unless it is committed within ``timeout`` s."""
        entry = AuditEntry(time=datetime.now(UTC), action=PROBE_ACTION, outcome=Outcome.OK, status=200)
        try:
            self._lane().worker.call((entry, None), timeout)
        except DeadlineExceeded:
            self.outcome.failed()
            raise DatabaseUnavailable("the audit record could not be written in time") from None

    def stuck_for(self) -> float:
        """Seconds the longest running commit is past its last writer's deadline (0.0 when none is)."""
        return max(lane.worker.overdue() for lane in self._lanes)

    def close(self) -> None:
        """Write what is queued, then stop the lanes."""
        for lane in self._lanes:
            if not lane.worker.close(self._timeout):
                log.warning("audit writer still busy at close; queued records may be lost")

    def _commit(self, lane: _Lane, batch: Sequence[_Item]) -> list[int | Failure]:
        """On ``lane``'s thread: append ``batch`` in one transaction; one outcome per entry."""
        if self.observer is not None:
            with contextlib.suppress(Exception):  # a metrics failure must not stop the writer
                self.observer(lane.worker.pending())
        try:
            version, accepted = lane.append(list(batch))
        except (HsmUnavailable, KeyMaterialMissing) as exc:
            # The seal (the HSM) failed, not the database: the HSM's own outcome says so already.
            return [Failure(exc)] * len(batch)
        except KeyManagerError as exc:
            self.outcome.failed()
            return [Failure(exc)] * len(batch)
        except Exception as exc:  # every failure must fail the waiting requests closed
            self.outcome.failed()
            log.error("audit append failed: %s", type(exc).__name__)
            return [Failure(DatabaseUnavailable("the audit record could not be written"))] * len(batch)
        with self._count_lock:
            self.batches += 1
        self.outcome.succeeded()
        return [version if ok else Failure(StaleMetadata()) for ok in accepted]


class AuditReader:
    """Reading and verifying the audit log (what auditors and admins ask for)."""

    def __init__(self, records: AuditRecords, key_id: Callable[[str], str]) -> None:
        self._records = records
        self._key_id = key_id
        """The id of the key named or identified by a reference; KeyNotFound when there is none."""

    def query(self, query: AuditQuery, key: str | None = None) -> list[AuditRecord]:
        """Records of every chain matching ``query`` in position order (newest first with ``query.newest_first``);
        ``key`` (a key's name or id) narrows them to that key's (KeyNotFound when there is no such key)."""
        if key is not None:
            query = replace(query, key_id=self._key_id(key))
        return self._records.query(query)

    def verify(self) -> Verification:
        """Every chain checked: links, seals (in the HSM) and heads (see ``AuditRecords.verify``)."""
        return self._records.verify()
