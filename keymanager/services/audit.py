"""The audit log's writer (group commit) and its reader.

Every request that touches a key or a principal waits for its audit record to be committed
before it answers (fail closed). One writer thread per process takes every record waiting
at that moment and appends them all in one transaction, then releases the waiting requests:
under load, one commit serves many requests, so the chain (single across processes, since
each append locks the chain head) does not become the throughput ceiling.
"""

from __future__ import annotations

import contextlib
import logging
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


class AuditWriter:
    """Appends audit entries to the chain; :meth:`awrite` returns once the entry is committed.

    An entry may carry the metadata version its request relied on: at commit, if the version
    has moved on, the entry is not written and its writer gets :class:`StaleMetadata` (the
    request then checks again against the database and writes what really happened).
    A write not committed within ``timeout`` seconds fails with DatabaseUnavailable (fail closed).
    """

    def __init__(self, records: AuditRecords, *, max_batch: int = 1000, timeout: float = 30.0) -> None:
        self._records = records
        self._timeout = timeout
        self._writer: Worker[_Item, int] = Worker("audit-writer", self._commit, max_batch=max_batch)
        self.batches = 0
        """Transactions committed by this process's writer (for tests and metrics)."""
        self.outcome = LastOutcome()
        """Whether the last commit failed (or timed out) and none succeeded since."""
        self.observer: Callable[[int], None] | None = None
        """Called with the queue depth when the writer takes a batch."""
        self.on_failure: Callable[[], None] = _nothing
        """Called for each record :meth:`awrite` could not write (its request fails closed)."""

    async def awrite(self, entry: AuditEntry, expected_version: int | None = None) -> int:
        """Append ``entry`` and wait for the commit: the metadata version at commit, or the store's
        error, or StaleMetadata when ``expected_version`` is given and no longer current.

        The writer resolves the waiting requests of one event loop with one wake-up per commit.
        """
        try:
            return await self._writer.acall((entry, expected_version), self._timeout)
        except StaleMetadata:
            raise
        except DeadlineExceeded:
            self.outcome.failed()
            self.on_failure()
            raise DatabaseUnavailable("the audit record could not be written in time") from None
        except Exception:
            self.on_failure()
            raise

    def probe(self, timeout: float) -> None:
        """Write one readiness-probe record; DatabaseUnavailable unless it is committed within ``timeout`` s."""
        entry = AuditEntry(time=datetime.now(UTC), action=PROBE_ACTION, outcome=Outcome.OK, status=200)
        try:
            self._writer.call((entry, None), timeout)
        except DeadlineExceeded:
            self.outcome.failed()
            raise DatabaseUnavailable("the audit record could not be written in time") from None

    def stuck_for(self) -> float:
        """Seconds the running commit is past its last writer's deadline (0.0 when none is)."""
        return self._writer.overdue()

    def close(self) -> None:
        """Write what is queued, then stop the writer."""
        if not self._writer.close(self._timeout):
            log.warning("audit writer still busy at close; queued records may be lost")

    def _commit(self, batch: Sequence[_Item]) -> list[int | Failure]:
        """On the writer thread: append ``batch`` in one transaction; one outcome per entry."""
        if self.observer is not None:
            with contextlib.suppress(Exception):  # a metrics failure must not stop the writer
                self.observer(self._writer.pending())
        try:
            version, accepted = self._records.append_current(list(batch))
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
        """Records matching ``query`` in sequence order (newest first with ``query.newest_first``);
        ``key`` (a key's name or id) narrows them to that key's (KeyNotFound when there is no such key)."""
        if key is not None:
            query = replace(query, key_id=self._key_id(key))
        return self._records.query(query)

    def verify(self) -> Verification:
        """The whole chain checked: links, seals (in the HSM) and head (see ``AuditRecords.verify``)."""
        return self._records.verify()
