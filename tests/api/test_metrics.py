"""``/metrics``: Prometheus text for admins and auditors, with requests, latencies and HSM operations."""

from __future__ import annotations

from fastapi.testclient import TestClient

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
