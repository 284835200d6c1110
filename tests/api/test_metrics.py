"""``/metrics``: Prometheus text for admins and auditors, with requests, latencies and HSM operations."""

from __future__ import annotations

import prometheus_client
import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest

from keymanager.api import metrics
from keymanager.api.app import create_app
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

    def broken(batch: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(services.audit_records, "append_current", broken)
    refused = lenient_client.get("/v1/principals", headers=admin)  # a record the audit trail writes
    assert refused.status_code == 503
    monkeypatch.undo()

    after = _value(lenient_client.get("/metrics", headers=admin).text, "km_audit_write_failures_total")
    assert after == before + 1


def test_two_apps_in_one_process_count_apart_and_nothing_is_registered_globally(
    services: Services, admin_token: str
) -> None:
    admin = auth(admin_token)
    first, second = create_app(services=services), create_app(services=services)
    with (
        TestClient(first, base_url="https://testserver") as one,
        TestClient(second, base_url="https://testserver") as two,
    ):
        for _ in range(3):
            assert one.get("/v1/health").status_code == 200
        assert two.get("/v1/health").status_code == 200
        texts = one.get("/metrics", headers=admin).text, two.get("/metrics", headers=admin).text
    health = 'km_requests_total{method="GET",route="/v1/health",status="200"}'
    assert (_value(texts[0], health), _value(texts[1], health)) == (3, 1)
    assert all("process_cpu_seconds_total" in text and "km_build_info{" in text for text in texts)
    assert first.state.metrics.registry is not second.state.metrics.registry
    registered = prometheus_client.REGISTRY._names_to_collectors  # no collector made at import
    assert not [name for name in registered if name.startswith("km_")]


def _samples(registry: prometheus_client.CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for m in registry.collect() for s in m.samples if "created" not in s.name]


@pytest.mark.parametrize("values", [[0.0, 0.0005, 0.001, 0.0011, 0.3, 10.0, 10.5, 99.0], [0.002] * 5])
def test_a_tally_writes_what_as_many_observe_calls_would(values: list[float]) -> None:
    """``Observed.into`` reaches into prometheus_client's histogram children (it has no public call
    that observes several values): the same samples as observing each value, bounds included."""
    direct, tallied = prometheus_client.CollectorRegistry(), prometheus_client.CollectorRegistry()
    one = prometheus_client.Histogram("t_seconds", "t", ["route"], registry=direct, buckets=metrics._FAST)
    other = prometheus_client.Histogram("t_seconds", "t", ["route"], registry=tallied, buckets=metrics._FAST)
    tally: metrics.Tally[str] = metrics.Tally(metrics._FAST)
    for value in values:
        one.labels("r").observe(value)
        tally.add("r", value)
    taken = tally.take()
    assert list(taken) == ["r"] and taken["r"].count == len(values)
    taken["r"].into(other.labels("r"))
    assert _samples(tallied) == _samples(direct)
    assert tally.take() == {}


def test_requests_are_counted_at_the_flush_not_before() -> None:
    app_metrics = metrics.Metrics()
    app_metrics.observe_request("/v1/health", "GET", 200, 0.0004)
    app_metrics.observe_hsm("encrypt", 0.00003, failed=True)
    health = 'km_requests_total{method="GET",route="/v1/health",status="200"}'
    assert health not in generate_latest(app_metrics.registry).decode()
    app_metrics.flush()
    text = generate_latest(app_metrics.registry).decode()
    assert _value(text, health) == 1
    assert _value(text, 'km_hsm_errors_total{operation="encrypt"}') == 1
    assert _value(text, 'km_hsm_operation_seconds_bucket{le="0.0005",operation="encrypt"}') == 1
