"""The group-commit audit writer fails requests closed when it cannot write in time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from keymanager.db.audit import AuditRecords
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.errors import DatabaseUnavailable
from keymanager.services.audit import PROBE_ACTION, AuditWriter, StaleMetadata
from keymanager.services.audit_log import AuditLog, Owed, Settled


class SlowStore(AuditRecords):
    """A store whose commits hang (a locked or unreachable database) until ``released`` is set."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def append_current(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        assert self.released.wait(30)
        return 7, [expected in (None, 7) for _, expected in items]


ENTRY = AuditEntry(time=datetime.now(UTC), action="key.encrypt", outcome=Outcome.OK, status=200)


def test_a_stuck_writer_fails_the_request_closed() -> None:
    store = SlowStore()
    log = AuditWriter(store, timeout=0.2)
    with pytest.raises(DatabaseUnavailable):
        asyncio.run(log.awrite(ENTRY))
    store.released.set()
    log.close()


def test_a_stale_expected_version_is_refused_and_a_current_one_accepted() -> None:
    store = SlowStore()
    store.released.set()
    log = AuditWriter(store, timeout=5)

    async def both() -> list[object]:
        return await asyncio.gather(log.awrite(ENTRY, 7), log.awrite(ENTRY, 6), return_exceptions=True)

    current, stale = asyncio.run(both())
    assert current == 7
    assert isinstance(stale, StaleMetadata)
    log.close()


class FlakyStore(AuditRecords):
    """A store whose appends fail while ``broken`` is set (a full disk), and succeed otherwise."""

    def __init__(self) -> None:
        self.broken = True
        self.written: list[AuditEntry] = []

    def append_current(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        if self.broken:
            raise OSError("No space left on device")
        self.written.extend(entry for entry, _ in items)
        return 1, [True] * len(items)


def test_a_failed_commit_fails_closed_and_marks_the_log_failing_until_one_succeeds() -> None:
    store = FlakyStore()
    log = AuditWriter(store, timeout=5)
    with pytest.raises(DatabaseUnavailable) as info:
        asyncio.run(log.awrite(ENTRY))
    assert "space" not in str(info.value)
    assert log.outcome.failing
    store.broken = False
    assert asyncio.run(log.awrite(ENTRY)) == 1
    assert not log.outcome.failing
    log.close()


def test_a_timed_out_write_marks_the_log_failing_and_stuck_while_it_runs() -> None:
    log = AuditWriter(SlowStore(), timeout=0.2)
    assert log.stuck_for() == 0.0
    with pytest.raises(DatabaseUnavailable):
        asyncio.run(log.awrite(ENTRY))
    assert log.outcome.failing
    assert log.stuck_for() > 0  # the commit (1 s) is still running past its writer's deadline
    log.close()


def test_the_readiness_probe_writes_one_record() -> None:
    store = FlakyStore()
    log = AuditWriter(store, timeout=5)
    with pytest.raises(DatabaseUnavailable):
        log.probe(5)
    store.broken = False
    log.probe(5)
    assert [entry.action for entry in store.written] == [PROBE_ACTION]
    assert not log.outcome.failing
    log.close()


def _settle(log: AuditLog, action: str | None, made: list[str], **facts: object) -> Settled:
    """``log.settle`` of ``action`` with ``facts``; each record it makes is named in ``made``."""

    def entry() -> AuditEntry:
        made.append(str(action))
        return ENTRY

    arguments: dict[str, object] = {"authenticated": True, "success_taken": False, "status": 200, **facts}
    return asyncio.run(log.settle(action, entry=entry, **arguments))  # type: ignore[arg-type]


def test_settle_writes_the_record_an_answer_owes_and_makes_no_other() -> None:
    store = FlakyStore()
    store.broken = False
    writer = AuditWriter(store, timeout=5)
    log, made = AuditLog(writer), []
    assert _settle(log, "key.get", made) == Settled(Owed.ANSWER)
    assert _settle(log, "key.encrypt", made, status=403) == Settled(Owed.ANSWER)
    assert _settle(log, "key.encrypt", made, success_taken=True) == Settled(Owed.NOTHING)
    assert _settle(log, "key.encrypt", made, success_taken=True, status=409).owed is Owed.ANSWER
    assert _settle(log, "audit.read", made, status=403) == Settled(Owed.NOTHING)
    assert _settle(log, None, made, status=404) == Settled(Owed.NOTHING)
    assert _settle(log, "kms.Encrypt", made, authenticated=False, status=400) == Settled(Owed.SUMMARY)
    assert _settle(log, "kmip.Query", made) == Settled(Owed.NOTHING)
    assert _settle(log, "kmip.Query", made, status=403) == Settled(Owed.ANSWER)
    assert made == ["key.get", "key.encrypt", "key.encrypt", "kmip.Query"]
    assert len(store.written) == 4
    writer.close()


def test_a_record_settle_cannot_write_is_its_error_and_one_line_without_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FlakyStore()
    writer = AuditWriter(store, timeout=5)
    log, made = AuditLog(writer), []
    settled = _settle(log, "key.get", made)
    assert settled.owed is Owed.ANSWER and isinstance(settled.error, DatabaseUnavailable)
    assert "space" not in str(settled.error) and "space" not in caplog.text
    assert [r.getMessage() for r in caplog.records if r.name == "keymanager.services.audit_log"] == [
        "the audit record of key.get could not be written: DatabaseUnavailable"
    ]

    def broken() -> AuditEntry:
        raise RuntimeError("a bug making the record")

    unmade = asyncio.run(log.settle("key.get", authenticated=True, success_taken=False, status=200, entry=broken))
    assert unmade.error is not None and unmade.error.message == "the audit record could not be written"
    writer.close()
