"""Which audit record a request owes, and the writing of every one: the one place, for every door.

A door settles each answer with :meth:`AuditLog.settle`, which decides what the request owes
(:meth:`AuditLog.owed`), writes it, and tells the door what came of it (:class:`Settled`). What is
owed follows from four facts every door knows — its action (whether it is audited is the rights
table's say, ``authorization.audited``), whether its caller authenticated, whether it took its
success record, and the status of its answer:

- nothing, for a request of an action that is not audited (health, the audit log's own reads),
  or for a success whose record it took to commit with its change: in the change's own
  transaction (the store writes it there), or before it answers (:meth:`AuditLog.success`, which
  ``run_validated`` calls);
- the record of its answer (:attr:`Owed.ANSWER`): a read, a refusal, a failure, written as the
  answer starts; the answer must not leave if it cannot be written (:attr:`Settled.error`: the
  door answers its protocol's 503 instead);
- a share of a summary (:attr:`Owed.SUMMARY`), for a request refused before its caller
  authenticated: never one record each, but counted per client address by the throttle
  (``services/throttle.py``) and written as at most one ``auth.failed`` record per address
  and interval (:meth:`AuditLog.failed_authentication`, :meth:`AuditLog.summaries`).

How each door spells a record (its action, the key it names, a refusal's code) is the door's
translation; whether it is written, and writing it, is this module's. :meth:`AuditLog._write`
is the only caller of ``AuditWriter.awrite`` (``tests/test_rules.py`` holds that line).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.errors import DatabaseUnavailable, KeyManagerError
from keymanager.services.audit import AuditWriter
from keymanager.services.authorization import audited
from keymanager.services.throttle import FailureSummary

log = logging.getLogger(__name__)

AUTH_FAILED = "auth.failed"
"""Audit action of the summaries of failed authentications."""


class Owed(enum.Enum):
    """What a request owes the audit log (see the module docstring)."""

    NOTHING = "nothing"
    ANSWER = "the record of its answer"
    SUMMARY = "a share of its address's summary of failed authentications"


@dataclass(frozen=True, slots=True)
class Settled:
    """What came of an answer's settling: what it owed, and — when that was its record and the
    record could not be written — why (the answer must not leave: the door answers its 503)."""

    owed: Owed
    error: KeyManagerError | None = None


_NOTHING = Settled(Owed.NOTHING)
_SUMMARY = Settled(Owed.SUMMARY)
_WRITTEN = Settled(Owed.ANSWER)


class AuditLog:
    """Decides which record a request owes and writes every record of a request (the module docstring)."""

    def __init__(self, writer: AuditWriter) -> None:
        self._writer = writer

    @staticmethod
    def owed(action: str | None, *, authenticated: bool, success_taken: bool, status: int) -> Owed:
        """What a request of ``action`` (None: its door could not tell) owes, answered with
        ``status``: ``authenticated`` — the door accepted its caller's credential;
        ``success_taken`` — it took its success record to commit with its change."""
        if action is None or not audited(action, refused=status >= 400) or (success_taken and status < 400):
            return Owed.NOTHING
        return Owed.ANSWER if authenticated else Owed.SUMMARY

    async def settle(
        self,
        action: str | None,
        *,
        authenticated: bool,
        success_taken: bool,
        status: int,
        entry: Callable[[], AuditEntry | Awaitable[AuditEntry]],
    ) -> Settled:
        """Settle the answer ``status`` to a request of ``action``: write the record it owes
        (:meth:`owed`), made by ``entry`` (a function, or a coroutine function) only when it is
        owed. A record that cannot be written is one ERROR line (the action, the error's class)
        and :attr:`Settled.error`; a summary's share is the door's admission's to count."""
        owed = self.owed(action, authenticated=authenticated, success_taken=success_taken, status=status)
        if owed is Owed.NOTHING:
            return _NOTHING
        if owed is Owed.SUMMARY:
            return _SUMMARY
        try:
            made = entry()
            await self._write(made if isinstance(made, AuditEntry) else await made)
        except Exception as exc:
            log.error("the audit record of %s could not be written: %s", action, type(exc).__name__)
            unwritten = DatabaseUnavailable("the audit record could not be written")
            return Settled(Owed.ANSWER, exc if isinstance(exc, KeyManagerError) else unwritten)
        return _WRITTEN

    async def success(self, entry: AuditEntry, expected_version: int | None) -> None:
        """Commit the success record ``entry`` of a request before it answers; StaleMetadata when
        ``expected_version`` is given and no longer current (the request runs again on fresh
        reads), the audit log's error when it cannot be written."""
        await self._write(entry, expected_version)

    async def failed_authentication(
        self, summary: FailureSummary | None, *, request_id: str, status: int, method: str, path: str
    ) -> None:
        """Write ``summary`` (when the throttle says one is due) naming the request ``method path``
        that made it due and its ``status``; the audit log's error if it cannot be written."""
        if summary is not None:
            await self._write(_summary_entry(summary, request_id, status, {"method": method, "path": path}))

    async def summaries(self, summaries: list[FailureSummary]) -> None:
        """Write the summaries whose interval is over (no request made them due: status 401). One
        that cannot be written is a WARNING line and its counts are lost (each failure was counted)."""
        for summary in summaries:
            try:
                await self._write(_summary_entry(summary, "", 401, {}))
            except Exception as exc:  # the loop that flushes them goes on
                log.warning("could not record a summary of failed authentications: %s", type(exc).__name__)

    async def _write(self, entry: AuditEntry, expected_version: int | None = None) -> None:
        await self._writer.awrite(entry, expected_version)


def _summary_entry(summary: FailureSummary, request_id: str, status: int, details: dict[str, str]) -> AuditEntry:
    """The audit entry of a summary of failed authentications (``status``: of the request that made it due)."""
    counts = {"failures": summary.failures, "throttled": summary.throttled}
    if summary.client is None:
        counts["addresses"] = summary.addresses
    return AuditEntry(
        time=datetime.now(UTC),
        action=AUTH_FAILED,
        outcome=Outcome.DENIED,
        status=status,
        request_id=request_id,
        client=summary.client,
        details={**counts, **details},
    )
