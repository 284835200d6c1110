"""The strict contract: JSON types as documented, ISO 8601 times, ``Allow`` on 405, and an
OpenAPI description that lists every refusal a route can give."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.support import assert_error, b64, use_policy
from tests.conftest import auth

AUTHENTICATED_REFUSALS = {"401", "403", "413", "429"}


@pytest.fixture
def billing(new_principal: Callable[..., str]) -> dict[str, str]:
    return auth(new_principal("billing"))


@pytest.fixture
def cards(new_key: Callable[..., dict[str, Any]], billing: dict[str, str]) -> dict[str, Any]:
    return new_key("cards", use_policy("billing"))


@pytest.mark.parametrize("enabled", [0, 1, "true", "false", "yes", "", None.__class__.__name__])
def test_enabled_must_be_a_json_boolean(
    client: TestClient, admin: dict[str, str], cards: dict[str, Any], enabled: Any
) -> None:
    response = client.patch("/v1/keys/cards", json={"enabled": enabled}, headers=admin)
    assert_error(response, 422, "invalid_request")
    assert client.get("/v1/keys/cards", headers=admin).json()["state"] == "enabled"


def test_enabled_false_and_true_still_work(client: TestClient, admin: dict[str, str], cards: dict[str, Any]) -> None:
    assert client.patch("/v1/keys/cards", json={"enabled": False}, headers=admin).json()["state"] == "disabled"
    assert client.patch("/v1/keys/cards", json={"enabled": True}, headers=admin).json()["state"] == "enabled"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", "/v1/keys/cards", {"min_decryption_version": 1.0}),
        ("PATCH", "/v1/keys/cards", {"min_decryption_version": "1"}),
        ("PATCH", "/v1/keys/cards", {"min_decryption_version": True}),
        ("PATCH", "/v1/keys/cards", {"description": 5}),
        ("PATCH", "/v1/keys/cards", {"policy": {"not_after": 1900000000}}),
        ("PATCH", "/v1/keys/cards", {"policy": {"not_after": "1900000000"}}),
        ("PATCH", "/v1/keys/cards", {"policy": {"not_before": 0.5}}),
        ("PATCH", "/v1/keys/cards", {"policy": {"encrypt": "billing"}}),
        ("POST", "/v1/keys", {"name": "k", "rotation_period_days": "30"}),
        ("POST", "/v1/keys", {"name": "k", "rotation_period_days": 30.0}),
        ("POST", "/v1/keys", {"name": "k", "algorithm": 1}),
        ("POST", "/v1/principals", {"name": "p", "role": 1}),
        ("POST", "/v1/principals", {"name": 5, "role": "app"}),
        ("POST", "/v1/keys/cards/datakey", {"bits": "256"}),
        ("POST", "/v1/keys/cards/datakey", {"bits": 256.0}),
        ("POST", "/v1/keys/cards/datakey", {"include_plaintext": 0}),
        ("POST", "/v1/keys/cards/datakey", {"include_plaintext": "false"}),
        ("POST", "/v1/keys/cards/mac/verify", {"data": "QQ==", "mac": "QQ==", "key_version": "1"}),
        ("POST", "/v1/keys/cards/encrypt", {"plaintext": "QQ==", "context": {"row": 1}}),
    ],
)
def test_numbers_booleans_and_times_have_their_json_types(
    client: TestClient,
    admin: dict[str, str],
    billing: dict[str, str],
    cards: dict[str, Any],
    method: str,
    path: str,
    body: dict[str, Any],
) -> None:
    headers = billing if path.startswith("/v1/keys/cards/") else admin
    assert_error(client.request(method, path, json=body, headers=headers), 422, "invalid_request")


def test_documented_types_are_accepted(
    client: TestClient, admin: dict[str, str], billing: dict[str, str], cards: dict[str, Any]
) -> None:
    policy = {**use_policy("billing"), "not_before": "2020-01-01T00:00:00Z", "not_after": "2999-12-31T23:59:59+01:00"}
    body = {"policy": policy, "min_decryption_version": 1, "description": "d"}
    assert client.patch("/v1/keys/cards", json=body, headers=admin).status_code == 200
    created = client.post("/v1/keys", json={"name": "k2", "rotation_period_days": 30}, headers=admin)
    assert created.status_code == 201, created.text
    response = client.post(
        "/v1/keys/cards/encrypt", json={"plaintext": b64(b"x"), "context": {"a": "b"}}, headers=billing
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("since", ["0.5", "0", "1700000000", "-1", "yesterday", "2030-13-01T00:00:00Z", ""])
def test_audit_since_is_iso_8601_only(client: TestClient, admin: dict[str, str], since: str) -> None:
    assert_error(client.get("/v1/audit", params={"since": since}, headers=admin), 422, "invalid_request")


@pytest.mark.parametrize("query", ["limit=1.0", "limit=+5", "limit=%205", "after=1e3", "limit=true"])
def test_query_numbers_are_decimal_digits(client: TestClient, admin: dict[str, str], query: str) -> None:
    assert_error(client.get(f"/v1/audit?{query}", headers=admin), 422, "invalid_request")


def test_audit_order_desc_gives_the_newest_first_and_pages_with_before(
    client: TestClient, admin: dict[str, str], new_principal: Callable[..., str]
) -> None:
    for n in range(5):
        new_principal(f"audit-order-{n}")
    oldest = [r["position"] for r in client.get("/v1/audit", params={"limit": "1000"}, headers=admin).json()["records"]]
    newest = client.get("/v1/audit", params={"order": "desc", "limit": "3"}, headers=admin).json()
    assert [r["position"] for r in newest["records"]] == oldest[::-1][:3] and newest["next"] == oldest[-3]
    older = client.get("/v1/audit", params={"order": "desc", "limit": "3", "before": newest["next"]}, headers=admin)
    assert [r["position"] for r in older.json()["records"]] == oldest[::-1][3:6]
    assert_error(client.get("/v1/audit?order=newest", headers=admin), 422, "invalid_request")
    assert_error(client.get("/v1/audit?before=0", headers=admin), 422, "invalid_request")


def test_audit_since_accepts_iso_8601(client: TestClient, admin: dict[str, str], billing: dict[str, str]) -> None:
    for since in ("2020-01-01T00:00:00Z", "2020-01-01T00:00:00+02:00", "2020-01-01T00:00:00", "2020-01-01"):
        response = client.get("/v1/audit", params={"since": since, "limit": "5"}, headers=admin)
        assert response.status_code == 200, (since, response.text)
        assert response.json()["records"]
    future = client.get("/v1/audit", params={"since": "2999-01-01T00:00:00Z"}, headers=admin)
    assert future.json()["records"] == []


def test_pending_days_is_a_decimal_number(client: TestClient, admin: dict[str, str], cards: dict[str, Any]) -> None:
    assert_error(client.delete("/v1/keys/cards?pending_days=7.0", headers=admin), 422, "invalid_request")
    assert client.delete("/v1/keys/cards?pending_days=7", headers=admin).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v1/keys/cards", "DELETE, GET, PATCH"),
        ("POST", "/v1/keys/cards", "DELETE, GET, PATCH"),
        ("DELETE", "/v1/keys", "GET, POST"),
        ("GET", "/v1/keys/cards/encrypt", "POST"),
        ("PUT", "/v1/decrypt", "POST"),
        ("POST", "/v1/health", "GET"),
        ("DELETE", "/metrics", "GET"),
        ("PATCH", "/v1/principals/billing", "DELETE"),
        ("POST", "/v1/audit/verify", "GET"),
    ],
)
def test_405_names_every_allowed_method(
    client: TestClient, admin: dict[str, str], method: str, path: str, allow: str
) -> None:
    response = client.request(method, path, headers=admin)
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"] == allow


def test_every_documented_method_is_in_the_allow_of_its_path(client: TestClient, admin: dict[str, str]) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path, operations in paths.items():
        concrete = path.replace("{key}", "cards").replace("{name}", "billing")
        response = client.request("OPTIONS", concrete, headers=admin)
        assert_error(response, 405, "method_not_allowed")
        assert {m.upper() for m in operations} <= set(response.headers["allow"].split(", ")), path


def test_openapi_documents_every_refusal_with_the_error_schema(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    error_ref = "#/components/schemas/ErrorBody"
    open_routes = {("get", "/v1/health"), ("get", "/v1/ready")}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            expected = {"413", "429"} if (method, path) in open_routes else AUTHENTICATED_REFUSALS
            responses = operation["responses"]
            assert expected <= set(responses), (method, path, sorted(responses))
            for status in expected:
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": error_ref}, (method, path, status)
            assert "Retry-After" in responses["429"]["headers"], (method, path)
    assert {"401", "403"} <= set(spec["paths"]["/metrics"]["get"]["responses"])
    error = spec["components"]["schemas"]["ErrorBody"]
    assert error["additionalProperties"] is False and set(error["required"]) == {"error", "request_id"}


def test_whoami_names_the_caller_for_every_role(
    client: TestClient, admin: dict[str, str], new_principal: Callable[..., str]
) -> None:
    for role in ("app", "auditor", "admin"):
        token = new_principal(f"whoami-{role}", role)
        me = client.get("/v1/whoami", headers=auth(token))
        assert me.status_code == 200, me.text
        assert (me.json()["name"], me.json()["role"]) == (f"whoami-{role}", role) and "token" not in me.json()
    assert_error(client.get("/v1/whoami"), 401, "unauthenticated")
    assert_error(client.get("/v1/whoami", headers=auth("not-a-token")), 401, "unauthenticated")
    records = client.get("/v1/audit", params={"action": "principal.whoami"}, headers=admin).json()["records"]
    assert {r["principal"] for r in records} >= {"whoami-app", "whoami-auditor", "whoami-admin"}
