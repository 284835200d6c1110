"""``/v1/ready`` tells the truth: 503 naming the part after a failed HSM operation or audit write,
200 again by itself once that part works (SoftHSM and SQLite; faults injected at the PKCS#11
call or the audit append)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pkcs11 import exceptions as p11

from keymanager.config import Settings
from keymanager.domain.audit import AuditQuery
from keymanager.errors import DatabaseUnavailable
from keymanager.hsm import Hsm, operations
from keymanager.services.audit import PROBE_ACTION
from keymanager.services.container import Services
from tests.api.support import assert_error
from tests.conftest import make_settings

NOT_READY_HSM = {"status": "unavailable", "hsm": "unavailable", "database": "ok"}
NOT_READY_DB = {"status": "unavailable", "hsm": "ok", "database": "unavailable"}
READY = {"status": "ok", "hsm": "ok", "database": "ok"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Readiness probes a failed part on every check (no throttling) so each answer is deterministic."""
    return make_settings(tmp_path / "var", ready_probe_interval_seconds=1e-6)


def _write_fault(*args: Any, **kwargs: Any) -> None:
    raise p11.DeviceMemory()  # what a full disk or a read-only token directory looks like


def _ready(client: TestClient) -> tuple[int, Any]:
    response = client.get("/v1/ready")
    return response.status_code, response.json()


def test_a_failed_hsm_write_makes_ready_503_until_the_hsm_takes_writes_again(
    client: TestClient, hsm: Hsm, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _ready(client) == (200, READY)
    monkeypatch.setattr(operations, "generate_version", _write_fault)
    monkeypatch.setattr(operations, "probe", _write_fault)
    assert_error(client.post("/v1/keys", json={"name": "cards", "policy": {}}, headers=admin), 503, "hsm_unavailable")
    assert _ready(client) == (503, NOT_READY_HSM)
    assert _ready(client) == (503, NOT_READY_HSM)  # the ping still answers; the failure stands

    monkeypatch.undo()
    assert _ready(client) == (200, READY)  # the probe wrote and destroyed a token object
    assert hsm.find_labels("km-ready-probe") == []
    assert client.post("/v1/keys", json={"name": "cards", "policy": {}}, headers=admin).status_code == 201


def test_a_successful_operation_clears_an_hsm_failure(
    client: TestClient, hsm: Hsm, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "generate_version", _write_fault)
    assert_error(client.post("/v1/keys", json={"name": "cards", "policy": {}}, headers=admin), 503, "hsm_unavailable")
    monkeypatch.undo()
    assert client.post("/v1/keys", json={"name": "cards", "policy": {}}, headers=admin).status_code == 201
    assert not hsm.outcome.failing
    assert _ready(client) == (200, READY)


def test_a_failed_audit_write_makes_ready_503_until_an_audit_write_succeeds(
    client: TestClient, services: Services, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseUnavailable("the database is unavailable")

    monkeypatch.setattr(services.audit_records, "append_current", full_disk)
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": "aGk="}, headers=admin)
    assert_error(response, 503, "database_unavailable")  # its audit record could not be written
    assert _ready(client) == (503, NOT_READY_DB)  # SELECT 1 answers; the audit log does not take writes

    monkeypatch.undo()
    assert _ready(client) == (200, READY)
    probes = services.audit_records.query(AuditQuery(action=PROBE_ACTION))
    assert len(probes) == 1 and probes[0].entry.principal is None


def test_probes_are_throttled(tmp_path: Path, hsm: Hsm, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most one probe per interval: an unauthenticated caller cannot make readiness costly."""
    services = Services.build(make_settings(tmp_path / "var", ready_probe_interval_seconds=3600), hsm=hsm)
    probes: list[str] = []

    def counted(*args: Any) -> None:
        probes.append("probe")
        raise p11.DeviceMemory()

    monkeypatch.setattr(operations, "probe", counted)
    try:
        hsm.outcome.failed()
        assert services.readiness.check() == {"hsm": False, "database": True}
        assert services.readiness.check() == {"hsm": False, "database": True}
        assert probes == ["probe"]
        hsm.ping()  # a request's operation succeeds: ready at once, without waiting for a probe
        assert services.readiness.check() == {"hsm": True, "database": True}
    finally:
        services.close()
