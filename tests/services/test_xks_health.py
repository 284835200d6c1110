"""GetHealthStatus: a real GCM round trip in SoftHSM on a test key of its own, UNAVAILABLE or DEGRADED
when a part fails (faults injected at the PKCS#11 call or the audit append), cached for at most a minute."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pkcs11 import exceptions as p11

from keymanager.config import Settings
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.doors.xks import XksHealth
from keymanager.doors.xks.health import MAX_AGE_SECONDS, TEST_KEY_PREFIX
from keymanager.errors import DatabaseUnavailable, KeyManagerError
from keymanager.hsm import Hsm, operations
from keymanager.services.container import Services
from tests.conftest import make_settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Readiness probes a failed part on every check, so each answer is deterministic."""
    return make_settings(tmp_path / "var", ready_probe_interval_seconds=1e-6)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _fault(*args: Any, **kwargs: Any) -> None:
    raise p11.DeviceError()


def _status(answer: dict[str, Any]) -> str:
    (fleet,) = answer["ekmFleetDetails"]
    return str(fleet["healthStatus"])


def test_active_uses_a_test_key_of_its_own_and_names_the_token(services: Services, hsm: Hsm) -> None:
    health = XksHealth(hsm, services.readiness)
    answer = asyncio.run(health.status())
    assert _status(answer) == "ACTIVE"
    assert answer["ekmVendor"] == "SoftHSM project" and answer["ekmFleetDetails"][0]["model"] == "SoftHSM v2"
    assert answer["xksProxyFleetSize"] == 1 and answer["xksProxyVendor"] == "keymanager"
    labels = hsm.find_labels(TEST_KEY_PREFIX)
    assert len(labels) == 1 and labels[0].endswith("/aes")
    asyncio.run(XksHealth(hsm, services.readiness).status())  # another process finds the same test key
    assert hsm.find_labels(TEST_KEY_PREFIX) == labels


def test_a_failing_cryptography_is_unavailable_and_results_are_cached(
    services: Services, hsm: Hsm, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    health = XksHealth(hsm, services.readiness, clock=clock)

    async def rounds() -> list[str]:
        seen = [_status(await health.status())]
        monkeypatch.setattr(operations, "encrypt", _fault)
        clock.now += MAX_AGE_SECONDS - 1
        seen.append(_status(await health.status()))  # still the cached answer
        clock.now += 1
        seen.append(_status(await health.status()))  # checked again: the HSM fails
        monkeypatch.undo()
        clock.now += MAX_AGE_SECONDS
        seen.append(_status(await health.status()))
        return seen

    assert asyncio.run(rounds()) == ["ACTIVE", "ACTIVE", "UNAVAILABLE", "ACTIVE"]
    assert MAX_AGE_SECONDS <= 60


def test_an_hsm_that_takes_no_writes_is_degraded(services: Services, hsm: Hsm, monkeypatch: pytest.MonkeyPatch) -> None:
    health = XksHealth(hsm, services.readiness, max_age=0)
    asyncio.run(health.status())  # the test key exists
    monkeypatch.setattr(operations, "probe", _fault)
    hsm.outcome.failed()  # a write failed (a rotation, a new key): readiness probes, and the probe fails
    assert _status(asyncio.run(health.status())) == "DEGRADED"


def test_an_audit_log_that_takes_no_records_is_unavailable(
    services: Services, hsm: Hsm, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseUnavailable("the database is unavailable")

    monkeypatch.setattr(services.audit_records, "append_current", full_disk)
    entry = AuditEntry(time=datetime.now(UTC), action="test.write", outcome=Outcome.OK, status=200)
    with pytest.raises(KeyManagerError):
        asyncio.run(services.audit_writer.awrite(entry))
    health = XksHealth(hsm, services.readiness, max_age=0)
    assert _status(asyncio.run(health.status())) == "UNAVAILABLE"
    monkeypatch.undo()
    assert _status(asyncio.run(health.status())) == "ACTIVE"
