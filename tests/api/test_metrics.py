"""``/metrics``: Prometheus text for admins and auditors, with requests, latencies and HSM operations."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from keymanager.services.container import Services
from tests.api.support import assert_error, b64
from tests.conftest import auth


def test_metrics_count_requests_by_route_and_hsm_operations(client: TestClient, admin_token: str) -> None:
    policy = {"encrypt": ["admin"]}
    created = client.post("/v1/keys", json={"name": "metered", "policy": policy}, headers=auth(admin_token))
    assert created.status_code == 201, created.text
    for _ in range(3):
        client.post("/v1/keys/metered/encrypt", json={"plaintext": b64(b"x")}, headers=auth(admin_token))
    client.post("/v1/keys/metered/encrypt", json={"plaintext": "!"}, headers=auth(admin_token))
    scraped = client.get("/metrics", headers=auth(admin_token))
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    ok = 'km_requests_total{method="POST",route="/v1/keys/{key}/encrypt",status="200"}'
    bad = 'km_requests_total{method="POST",route="/v1/keys/{key}/encrypt",status="400"}'
    assert any(line.startswith(ok) and float(line.split()[-1]) >= 3 for line in text.splitlines())
    assert any(line.startswith(bad) for line in text.splitlines())
    assert 'km_request_duration_seconds_bucket{le="0.001",route="/v1/keys/{key}/encrypt"}' in text
    assert 'km_hsm_operation_seconds_count{operation="encrypt"}' in text
    assert "km_audit_queue_depth" in text


def test_metrics_need_admin_or_auditor(client: TestClient, admin_token: str) -> None:
    app = client.post("/v1/principals", json={"name": "app1", "role": "app"}, headers=auth(admin_token))
    assert_error(client.get("/metrics", headers=auth(app.json()["token"])), 403, "forbidden")
    assert_error(client.get("/metrics"), 401, "unauthenticated")


def _types(text: str) -> dict[str, str]:
    """Metric family name -> type, from the ``# TYPE`` lines."""
    return {line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")}


def _value(text: str, sample: str) -> float:
    """The value of the sample line starting with ``sample`` (exactly one)."""
    found = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(sample + " ")]
    assert len(found) == 1, (sample, found)
    return found[0]


def test_build_info_pool_keys_by_state_and_process_metrics(client: TestClient, admin_token: str) -> None:
    admin = auth(admin_token)
    for name in ("live-1", "live-2", "off"):
        assert client.post("/v1/keys", json={"name": name, "policy": {}}, headers=admin).status_code == 201
    client.patch("/v1/keys/off", json={"enabled": False}, headers=admin)

    text = client.get("/metrics", headers=admin).text
    types = _types(text)

    assert types["km_build_info"] == "gauge"
    assert any(line.startswith('km_build_info{python="') and 'version="' in line for line in text.splitlines())
    assert types["km_keys"] == "gauge"
    assert _value(text, 'km_keys{state="enabled"}') == 2 and _value(text, 'km_keys{state="disabled"}') == 1
    assert _value(text, 'km_keys{state="destroyed"}') == 0
    assert types["km_db_pool_connections_in_use"] == "gauge" and _value(text, "km_db_pool_connections_in_use") >= 0
    assert types["km_audit_write_failures_total"] == "counter" and _value(text, "km_audit_write_failures_total") >= 0
    assert types["process_cpu_seconds_total"] == "counter" and types["process_resident_memory_bytes"] == "gauge"
    assert types["python_gc_collections_total"] == "counter" and "python_info" in types


def test_an_audit_record_that_cannot_be_written_is_counted(
    lenient_client: TestClient, services: Services, admin_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = auth(admin_token)
    before = _value(lenient_client.get("/metrics", headers=admin).text, "km_audit_write_failures_total")

    async def broken(entry: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(services.audit_writer, "awrite", broken)
    refused = lenient_client.get("/v1/principals", headers=admin)  # a record the audit trail writes
    assert refused.status_code == 503
    monkeypatch.undo()

    after = _value(lenient_client.get("/metrics", headers=admin).text, "km_audit_write_failures_total")
    assert after == before + 1
