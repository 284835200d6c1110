"""The front door: names, lengths and credentials are checked before a byte of the body is read."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.api.metrics import Metrics
from keymanager.config import Settings
from keymanager.domain.audit import AuditQuery
from keymanager.services.audit_log import AUTH_FAILED
from keymanager.services.container import Services
from tests.api.support import assert_error, b64, use_policy
from tests.conftest import auth

MiB = 1024 * 1024


def front_client(services: Services, **settings: Any) -> TestClient:
    """A client of an app whose front-door settings are ``settings`` (on top of the services' own)."""
    changed: Settings = services.settings.model_copy(update=settings)
    return TestClient(create_app(changed, services=services), base_url="https://testserver")


def audit_of(services: Services, action: str | None = None) -> list[dict[str, Any]]:
    return [r.fields() for r in services.audit_records.query(AuditQuery(action=action, limit=1000))]


CHUNKED = (b"transfer-encoding", b"chunked")
HUNDRED_MB = (b"content-length", b"100000000")


def asgi_call(
    services: Services, method: str, path: str, headers: list[tuple[bytes, bytes]]
) -> tuple[int, dict[str, str], int]:
    """Call the app over raw ASGI with a body of 100 MB on its way: (status, headers, body bytes it read)."""
    app = create_app(services=services)
    read = 0
    started: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 64 * 1024
        return {"type": "http.request", "body": b"x" * 64 * 1024, "more_body": read < 100_000_000}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("192.0.2.7", 50000),
        "server": ("testserver", 443),
    }
    asyncio.run(app(scope, receive, send))
    answer = {k.decode(): v.decode() for k, v in started["headers"]}
    return started["status"], answer, read


@pytest.fixture
def cards(new_key: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    return new_key("cards", use_policy("billing"))


@pytest.fixture
def billing(new_principal: Callable[..., str]) -> str:
    return new_principal("billing")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/keys/cards/encrypt/batch"),
        ("POST", "/v1/keys/cards/encrypt/stream"),
        ("POST", "/v1/keys/cards/decrypt/stream"),
        ("POST", "/v1/keys"),
        ("PATCH", "/v1/keys/stream"),
        ("POST", "/v1/nowhere"),
    ],
)
def test_no_body_byte_is_read_before_authentication(
    services: Services, admin_token: str, method: str, path: str
) -> None:
    for headers in ([CHUNKED], [CHUNKED, (b"authorization", b"Bearer kmt_guessed")]):
        status, answer, read = asgi_call(services, method, path, headers)
        assert (status, read) == (401, 0)
        assert answer["connection"] == "close"  # the rest of the body is never read either


def test_a_length_over_the_routes_limit_is_413_before_reading(services: Services, admin_token: str) -> None:
    admin = [HUNDRED_MB, (b"authorization", f"Bearer {admin_token}".encode())]
    for method, path in (("PATCH", "/v1/keys/stream"), ("POST", "/v1/keys/cards/encrypt/batch"), ("POST", "/v1/keys")):
        status, answer, read = asgi_call(services, method, path, admin)
        assert (status, read, answer["connection"]) == (413, 0, "close")


def test_only_the_two_stream_routes_are_unlimited(client: TestClient, admin_token: str) -> None:
    big = b'{"description": "' + b"A" * (2 * MiB) + b'"}'
    for path in ("/v1/keys/stream", "/v1/keys/encrypt/stream"):
        response = client.patch(path, content=big, headers={**auth(admin_token), "content-type": "application/json"})
        assert_error(response, 413, "payload_too_large")

    def chunks() -> Iterator[bytes]:
        yield b'{"description": "'
        for _ in range(40):
            yield b"A" * 64 * 1024
        yield b'"}'

    response = client.patch(
        "/v1/keys/stream", content=chunks(), headers={**auth(admin_token), "content-type": "application/json"}
    )
    assert_error(response, 413, "payload_too_large")
    assert response.headers["connection"] == "close"


def test_a_batch_body_over_the_json_limit_is_read_once_authenticated(
    client: TestClient, billing: str, cards: dict[str, Any]
) -> None:
    items = [{"plaintext": b64(bytes(60 * 1024))} for _ in range(30)]  # about 2.4 MiB
    response = client.post("/v1/keys/cards/encrypt/batch", json={"items": items}, headers=auth(billing))
    assert response.status_code == 200, response.text
    assert len(response.json()["results"]) == 30


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/keys/" + "a" * 60_000),
        ("POST", "/v1/keys/" + "a" * 129 + "/encrypt"),
        ("POST", "/v1/keys/no%20spaces/decrypt"),
        ("PATCH", "/v1/keys/1abc"),
        ("DELETE", "/v1/principals/" + "p" * 65),
        ("GET", "/v1/objects/" + "0" * 33),
        ("DELETE", "/v1/objects/NOT-AN-ID"),
    ],
)
def test_a_reference_outside_the_name_rules_is_400_before_anything(
    client: TestClient, services: Services, method: str, path: str
) -> None:
    before = audit_of(services)
    for headers in ({}, auth("kmt_guessed")):
        response = client.request(method, path, json={}, headers=headers)
        assert_error(response, 400, "invalid_request")
        assert len(response.json()["error"]["message"]) < 200
    assert audit_of(services) == before  # nothing was looked at, nothing is recorded


def test_a_method_the_path_does_not_serve_is_405_even_with_a_bad_name(client: TestClient, admin_token: str) -> None:
    """Found by the fuzz run: ``TRACE /v1/principals/0`` answered 400 (the name) instead of 405."""
    for method, path, allowed in (
        ("TRACE", "/v1/principals/0", "DELETE"),
        ("PUT", "/v1/keys/0bad", "DELETE, GET, PATCH"),
    ):
        response = client.request(method, path, headers=auth(admin_token))
        assert_error(response, 405, "method_not_allowed")
        assert response.headers["allow"] == allowed
    assert_error(client.delete("/v1/principals/0", headers=auth(admin_token)), 400, "invalid_request")


def test_the_longest_names_pass_the_door(client: TestClient, admin_token: str) -> None:
    name = "k" + "x" * 127
    assert_error(client.get(f"/v1/keys/{name}", headers=auth(admin_token)), 404, "key_not_found")
    assert_error(client.delete("/v1/principals/" + "p" * 64, headers=auth(admin_token)), 404, "not_found")
    assert_error(client.get("/v1/objects/" + "0" * 32, headers=auth(admin_token)), 404, "not_found")


def test_public_routes_need_no_credentials_and_the_rest_do(client: TestClient) -> None:
    for path in ("/v1/health", "/v1/ready", "/openapi.json", "/docs"):
        assert client.get(path).status_code == 200, path
    assert_error(client.get("/v1/nothing-here"), 401, "unauthenticated")
    assert_error(client.get("/metrics"), 401, "unauthenticated")


def test_failed_authentications_are_throttled_per_address_with_retry_after(
    services: Services, billing: str, cards: dict[str, Any]
) -> None:
    with front_client(services, auth_failure_burst=3, auth_failures_per_second=0.5) as client:
        # The known principal is served from the cache before and after its address is throttled.
        assert client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(b"1")}, headers=auth(billing)).is_success
        for _ in range(3):
            assert_error(client.get("/v1/keys", headers=auth("kmt_guessed")), 401, "unauthenticated")
        for headers in (auth("kmt_guessed"), {}):
            throttled = client.get("/v1/keys", headers=headers)
            assert_error(throttled, 429, "rate_limited")
            assert 1 <= int(throttled.headers["retry-after"]) <= 2
        assert client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(b"2")}, headers=auth(billing)).is_success
        summaries = audit_of(services, AUTH_FAILED)
        assert len(summaries) == 1  # the first failure of the interval; the others wait for the summary
        assert (summaries[0]["client"], summaries[0]["outcome"], summaries[0]["status"]) == (
            "testclient",
            "denied",
            401,
        )
        assert summaries[0]["details"] == {"failures": 1, "throttled": 0, "method": "GET", "path": "/v1/keys"}
    assert _counters(client) == (3, 2)  # this app's own counters, from zero
    summaries = audit_of(services, AUTH_FAILED)  # the rest summed up at shutdown, in one record
    assert len(summaries) == 2
    assert (summaries[1]["details"]["failures"], summaries[1]["details"]["throttled"]) == (2, 2)
    assert all(len(json.dumps(summary)) <= 1024 for summary in summaries)


def test_a_refused_request_records_a_bounded_record(
    client: TestClient, services: Services, admin_token: str, billing: str, cards: dict[str, Any]
) -> None:
    name = "k" + "x" * 127
    client.post("/v1/keys", json={"name": name, "policy": {}}, headers=auth(admin_token))
    assert_error(
        client.post(f"/v1/keys/{name}/encrypt", json={"plaintext": "QQ=="}, headers=auth(billing)), 403, "forbidden"
    )
    assert_error(client.get(f"/v1/keys/{name}x", headers=auth("kmt_guessed")), 400, "invalid_request")
    assert_error(client.get(f"/v1/keys/{name}", headers=auth("kmt_guessed")), 401, "unauthenticated")
    for record in audit_of(services)[-2:]:
        assert len(json.dumps(record)) <= 1024, record


def test_unknown_credentials_leave_the_cache_as_it_was(
    client: TestClient, services: Services, admin_token: str
) -> None:
    with front_client(services, auth_failure_burst=10_000) as lenient:
        assert lenient.get("/v1/keys", headers=auth(admin_token)).status_code == 200
        before = services.cache.sizes()
        for number in range(200):
            lenient.post("/v1/keys/cards/encrypt", json={"plaintext": "QQ=="}, headers=auth(f"kmt_{number:043d}"))
            lenient.post(f"/v1/keys/k{number}/encrypt", json={"plaintext": "QQ=="}, headers=auth(admin_token))
        assert services.cache.sizes() == before


def _counters(client: TestClient) -> tuple[float, float]:
    """The counts of 401 and 429 refusals of the client's app so far."""
    app_metrics: Metrics = client.app.state.metrics  # type: ignore[attr-defined]
    text = app_metrics.exposition()[0].decode()
    return _sample(text, "km_auth_failures_total"), _sample(text, "km_auth_throttled_total")


def _sample(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))
