"""Which audit record a request owes, and the writing of every one: the one place, for every door.

A request owes what :meth:`AuditLog.owed` says, from four facts every door knows — whether its
action is audited, whether its caller authenticated, whether it took its success record, and
the status of its answer:

- nothing, for a request of an action that is not audited (health, the audit log's own reads),
  or for a success whose record it took to commit with its change: in the change's own
  transaction (the store writes it there), or before it answers (:meth:`AuditLog.success`, which
  ``run_validated`` calls);
- the record of its answer (:attr:`Owed.ANSWER`): a read, a refusal, a failure, written as the
  answer starts (:meth:`AuditLog.answer`); the answer must not leave if it cannot be written;
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
from datetime import UTC, datetime

from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.errors import DatabaseUnavailable, KeyManagerError
from keymanager.services.audit import AuditWriter
from keymanager.services.throttle import FailureSummary

log = logging.getLogger(__name__)

AUTH_FAILED = "auth.failed"
"""Audit action of the summaries of failed authentications."""


class Owed(enum.Enum):
    """What a request owes the audit log (see the module docstring)."""

    NOTHING = "nothing"
    ANSWER = "the record of its answer"
    SUMMARY = "a share of its address's summary of failed authentications"


class AuditLog:
    """Decides which record a request owes and writes every record of a request (the module docstring)."""

    def __init__(self, writer: AuditWriter) -> None:
        self._writer = writer

    @staticmethod
    def owed(*, audited: bool, authenticated: bool, success_taken: bool, status: int) -> Owed:
        """What a request owes, answered with ``status``: ``audited`` — its action is; ``authenticated``
        — the door accepted its caller's credential; ``success_taken`` — it took its success record
        to commit with its change."""
        if not audited or (success_taken and status < 400):
            return Owed.NOTHING
        return Owed.ANSWER if authenticated else Owed.SUMMARY

    async def success(self, entry: AuditEntry, expected_version: int | None) -> None:
        """Commit the success record ``entry`` of a request before it answers; StaleMetadata when
        ``expected_version`` is given and no longer current (the request runs again on fresh
        reads), the audit log's error when it cannot be written."""
        await self._write(entry, expected_version)

    async def answer(self, entry: AuditEntry) -> None:
        """Write the record ``entry`` an answer owes; DatabaseUnavailable (or the audit log's own
        KeyManagerError) when it cannot be written: the answer must not leave."""
        try:
            await self._write(entry)
        except KeyManagerError:
            raise
        except Exception:
            raise DatabaseUnavailable("the audit record could not be written") from None

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
