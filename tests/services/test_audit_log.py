"""The group-commit audit writer fails requests closed when it cannot write in time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from keymanager.db.audit import AuditStore
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.errors import DatabaseUnavailable
from keymanager.services.audit import AuditLog, StaleMetadata


class SlowStore(AuditStore):
    """A store whose commits hang (a locked or unreachable database)."""

    def __init__(self) -> None:
        pass

    def append_current(self, items: Sequence[tuple[AuditEntry, int | None]]) -> tuple[int, list[bool]]:
        time.sleep(1.0)
        return 7, [expected in (None, 7) for _, expected in items]


ENTRY = AuditEntry(time=datetime.now(UTC), action="key.encrypt", outcome=Outcome.OK, status=200)


def test_a_stuck_writer_fails_the_request_closed() -> None:
    log = AuditLog(SlowStore(), timeout=0.2)
    with pytest.raises(DatabaseUnavailable):
        asyncio.run(log.awrite(ENTRY))
    log.close()


def test_a_stale_expected_version_is_refused_and_a_current_one_accepted() -> None:
    log = AuditLog(SlowStore(), timeout=5)

    async def both() -> list[object]:
        return await asyncio.gather(log.awrite(ENTRY, 7), log.awrite(ENTRY, 6), return_exceptions=True)

    current, stale = asyncio.run(both())
    assert current == 7
    assert isinstance(stale, StaleMetadata)
    log.close()
