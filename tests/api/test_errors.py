"""Bad input, authentication, authorisation and policy: exact status, code and error body."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.domain.audit import AuditQuery, Outcome
from keymanager.domain.credentials import new_id
from keymanager.services.container import Services
from tests.api.support import assert_error, b64, use_policy
from tests.conftest import auth

CARD = b"4111111111111111"
MiB = 1024 * 1024


@pytest.fixture
def billing(new_principal: Callable[..., str]) -> dict[str, str]:
    return auth(new_principal("billing"))


@pytest.fixture
def cards(new_key: Callable[..., dict[str, Any]], billing: dict[str, str]) -> dict[str, Any]:
    return new_key("cards", use_policy("billing"))


def _ciphertext(client: TestClient, headers: dict[str, str], key: str = "cards") -> str:
    response = client.post(f"/v1/keys/{key}/encrypt", json={"plaintext": b64(CARD)}, headers=headers)
    assert response.status_code == 200, response.text
    text: str = response.json()["ciphertext"]
    return text


# -- request bodies -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/v1/keys/cards/encrypt", b"{not json"),
        ("/v1/keys/cards/encrypt", b""),
        ("/v1/keys/cards/encrypt", b"[]"),
        ("/v1/keys/cards/encrypt", b'"plaintext"'),
        ("/v1/keys/cards/encrypt", b'{"plaintext": 12}'),
        ("/v1/keys/cards/encrypt", b'{"plaintext": null}'),
        ("/v1/keys/cards/encrypt", b'{"plaintext": ["QQ=="]}'),
        ("/v1/keys/cards/encrypt", b'{"plaintext": "QQ==", "context": "table=cards"}'),
        ("/v1/keys/cards/encrypt", b'{"plaintext": "QQ==", "context": {"row": 17}}'),
        ("/v1/keys/cards/encrypt", b'{"plaintext": "QQ==", "unknown": 1}'),
        ("/v1/keys/cards/encrypt", b"{}"),
        ("/v1/keys/cards/decrypt", b'{"ciphertext": 5}'),
        ("/v1/keys/cards/decrypt", b"{}"),
        ("/v1/decrypt", b'{"ciphertext": {"a": 1}}'),
        ("/v1/decrypt", b'{"ciphertext": "km:1:", "context": []}'),
        ("/v1/keys", b'{"name": 5}'),
        ("/v1/keys", b'{"name": "k", "algorithm": "DES"}'),
        ("/v1/keys", b'{"name": "k", "policy": {"launch": ["billing"]}}'),
        ("/v1/keys", b'{"name": "k", "policy": {"encrypt": "billing"}}'),
        ("/v1/keys", b'{"name": "k", "policy": {"not_before": "soon"}}'),
        ("/v1/keys", b'{"name": "k", "rotation_period_days": 0}'),
        ("/v1/keys", b'{"name": ""}'),
        ("/v1/principals", b'{"name": "x", "role": "root"}'),
        ("/v1/principals", b'{"name": "x"}'),
        ("/v1/principals", b"{bad"),
    ],
)
def test_malformed_json_or_wrong_types_are_422(
    client: TestClient, admin: dict[str, str], billing: dict[str, str], cards: dict[str, Any], path: str, content: bytes
) -> None:
    headers = admin if path in ("/v1/keys", "/v1/principals") else billing
    response = client.post(path, content=content, headers={**headers, "content-type": "application/json"})
    body = assert_error(response, 422, "invalid_request")
    # The message says where, never echoes the values.
    assert "QQ==" not in body["error"]["message"] and "billing" not in body["error"]["message"]


def test_patch_wrong_types_are_422(client: TestClient, admin: dict[str, str], cards: dict[str, Any]) -> None:
    for body in ({"enabled": "maybe"}, {"min_decryption_version": 0}, {"policy": {"mac": 1}}, {"state": "x"}):
        assert_error(client.patch("/v1/keys/cards", json=body, headers=admin), 422, "invalid_request")


@pytest.mark.parametrize("plaintext", ["not base64!", "QQ=", "QUJ", "QUJD\n", " QUJD", "QU JD", "QUJD-_==", "é"])
def test_plaintext_not_base64_is_400(
    client: TestClient, billing: dict[str, str], cards: dict[str, Any], plaintext: str
) -> None:
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": plaintext}, headers=billing)
    body = assert_error(response, 400, "invalid_request", "plaintext is not valid base64")
    assert plaintext.strip() not in body["error"]["message"] or not plaintext.strip()


def test_plaintext_over_64_kib_is_413(client: TestClient, billing: dict[str, str], cards: dict[str, Any]) -> None:
    ok = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(bytes(64 * 1024))}, headers=billing)
    assert ok.status_code == 200
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(bytes(64 * 1024 + 1))}, headers=billing)
    assert_error(response, 413, "payload_too_large")


def test_body_over_request_limit_with_content_length_is_413(
    client: TestClient, billing: dict[str, str], admin: dict[str, str], cards: dict[str, Any]
) -> None:
    big = b'{"plaintext": "' + b"A" * MiB + b'"}'
    for path, headers in (("/v1/keys/cards/encrypt", billing), ("/v1/keys", admin), ("/v1/decrypt", billing)):
        response = client.post(path, content=big, headers={**headers, "content-type": "application/json"})
        assert response.request.headers["content-length"] == str(len(big))
        assert_error(response, 413, "payload_too_large")
    # Refused before authentication too.
    response = client.post("/v1/decrypt", content=big, headers={"content-type": "application/json"})
    assert_error(response, 413, "payload_too_large")


def test_chunked_body_over_request_limit_is_413(
    client: TestClient, billing: dict[str, str], cards: dict[str, Any]
) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"plaintext": "'
        for _ in range(20):
            yield b"A" * 64 * 1024
        yield b'"}'

    response = client.post(
        "/v1/keys/cards/encrypt", content=chunks(), headers={**billing, "content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert_error(response, 413, "payload_too_large")

    def small() -> Iterator[bytes]:
        yield b'{"plaintext": "'
        yield b64(CARD).encode()
        yield b'"}'

    response = client.post(
        "/v1/keys/cards/encrypt", content=small(), headers={**billing, "content-type": "application/json"}
    )
    assert response.status_code == 200, response.text


# -- keys and principals --------------------------------------------------------------


def test_unknown_key_is_404(client: TestClient, admin: dict[str, str], billing: dict[str, str]) -> None:
    for ref in ("nope", new_id()):
        assert_error(client.get(f"/v1/keys/{ref}", headers=admin), 404, "key_not_found")
        assert_error(client.patch(f"/v1/keys/{ref}", json={"enabled": False}, headers=admin), 404, "key_not_found")
        response = client.post(f"/v1/keys/{ref}/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
        assert_error(response, 404, "key_not_found")
        response = client.post(f"/v1/keys/{ref}/decrypt", json={"ciphertext": "km:1:"}, headers=billing)
        assert_error(response, 404, "key_not_found")


def test_unknown_route_and_method(client: TestClient, admin: dict[str, str]) -> None:
    assert_error(client.get("/v1/nothing-here", headers=admin), 404, "not_found")
    assert_error(client.put("/v1/keys", json={}, headers=admin), 405, "method_not_allowed")


def test_duplicate_names_are_409(
    client: TestClient, admin: dict[str, str], new_key: Callable[..., dict[str, Any]], new_principal: Callable[..., str]
) -> None:
    first = new_key("cards")
    response = client.post("/v1/keys", json={"name": "cards", "algorithm": "AES_256_GCM"}, headers=admin)
    assert_error(response, 409, "conflict")
    assert [k["id"] for k in client.get("/v1/keys", headers=admin).json() if k["name"] == "cards"] == [first["id"]]

    new_principal("billing")
    response = client.post("/v1/principals", json={"name": "billing", "role": "auditor"}, headers=admin)
    assert_error(response, 409, "conflict")
    response = client.post("/v1/principals", json={"name": "admin", "role": "admin"}, headers=admin)
    assert_error(response, 409, "conflict")


def test_invalid_names_are_400(client: TestClient, admin: dict[str, str]) -> None:
    for name in ("1cards", "has space", "a/b", "0123456789abcdef0123456789abcdef"):
        assert_error(client.post("/v1/keys", json={"name": name}, headers=admin), 400, "invalid_request")
    for name in ("1app", "has space", "a/b"):
        response = client.post("/v1/principals", json={"name": name, "role": "app"}, headers=admin)
        assert_error(response, 400, "invalid_request")


def test_the_name_of_a_kms_key_without_an_alias_is_refused_natively(client: TestClient, admin: dict[str, str]) -> None:
    """``kms-`` and 32 hex digits is the name the KMS door gives its keys (issue 41, item 6: taken before)."""
    auto_name = "kms-" + "0123456789abcdef" * 2
    response = client.post("/v1/keys", json={"name": auto_name}, headers=admin)
    assert_error(response, 400, "invalid_request")
    assert "kms-" in response.json()["error"]["message"]
    assert_error(client.get(f"/v1/keys/{auto_name}", headers=admin), 404, "key_not_found")
    for near in ("kms-" + "0123456789abcdef" * 2 + "0", "kms-" + "0123456789ABCDEF" * 2, "kms-cards"):
        assert client.post("/v1/keys", json={"name": near}, headers=admin).status_code == 201, near


def test_policy_window_must_be_ordered(client: TestClient, admin: dict[str, str]) -> None:
    policy = {"not_before": "2031-01-01T00:00:00Z", "not_after": "2030-01-01T00:00:00Z"}
    response = client.post("/v1/keys", json={"name": "cards", "policy": policy}, headers=admin)
    assert_error(response, 400, "invalid_request")
    assert_error(client.get("/v1/keys/cards", headers=admin), 404, "key_not_found")


# -- authentication -------------------------------------------------------------------


def _protected_calls(client: TestClient) -> list[Callable[[dict[str, str]], Any]]:
    return [
        lambda h: client.get("/v1/keys", headers=h),
        lambda h: client.get("/v1/keys/cards", headers=h),
        lambda h: client.post("/v1/keys", json={"name": "x"}, headers=h),
        lambda h: client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=h),
        lambda h: client.post("/v1/decrypt", json={"ciphertext": "km:1:"}, headers=h),
        lambda h: client.get("/v1/principals", headers=h),
    ]


def test_missing_or_unknown_credentials_are_401(
    services: Services, client: TestClient, cards: dict[str, Any], admin_token: str
) -> None:
    lenient = services.settings.model_copy(update={"auth_failure_burst": 1000})  # 54 failures, none throttled
    client = TestClient(create_app(lenient, services=services), base_url="https://testserver")
    bad_headers: list[dict[str, str]] = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer kmt_" + "A" * 43},
        {"Authorization": "Bearer " + admin_token + "x"},
        {"Authorization": "Bearer " + admin_token[:-1]},
        {"Authorization": "Basic " + admin_token},
        {"Authorization": admin_token},
    ]
    for headers in bad_headers:
        for call in _protected_calls(client):
            assert_error(call(headers), 401, "unauthenticated")
    assert client.get("/v1/keys", headers={"Authorization": "bearer " + admin_token}).status_code == 200


def test_deleted_principal_token_is_401(
    client: TestClient,
    admin: dict[str, str],
    new_principal: Callable[..., str],
    billing: dict[str, str],
    cards: dict[str, Any],
) -> None:
    token = billing["Authorization"].removeprefix("Bearer ")
    text = _ciphertext(client, auth(token))
    assert client.delete("/v1/principals/billing", headers=admin).status_code == 204
    for call in _protected_calls(client):
        assert_error(call(auth(token)), 401, "unauthenticated")
    response = client.post("/v1/decrypt", json={"ciphertext": text}, headers=auth(token))
    assert_error(response, 401, "unauthenticated")
    assert_error(client.delete("/v1/principals/billing", headers=admin), 404, "not_found")
    # A new principal of the same name gets a new token, the old one stays dead, and the
    # policy that named the old one does not name the new one.
    new_token = new_principal("billing")
    assert new_token != token
    response = client.post("/v1/decrypt", json={"ciphertext": text}, headers=auth(new_token))
    assert_error(response, 403, "forbidden")
    assert client.get("/v1/keys/cards", headers=admin).json()["policy"]["decrypt"] == []
    assert_error(client.get("/v1/keys", headers=auth(token)), 401, "unauthenticated")


def test_admin_cannot_delete_itself(client: TestClient, admin: dict[str, str]) -> None:
    assert_error(client.delete("/v1/principals/admin", headers=admin), 409, "conflict")


# -- authorisation --------------------------------------------------------------------


@pytest.mark.parametrize("role", ["app", "auditor"])
def test_non_admin_on_admin_routes_is_403(
    client: TestClient, new_principal: Callable[..., str], cards: dict[str, Any], role: str
) -> None:
    headers = auth(new_principal("someone", role))
    calls = [
        client.post("/v1/keys", json={"name": "mine"}, headers=headers),
        client.patch("/v1/keys/cards", json={"enabled": False}, headers=headers),
        client.post("/v1/principals", json={"name": "other", "role": "admin"}, headers=headers),
        client.get("/v1/principals", headers=headers),
        client.delete("/v1/principals/admin", headers=headers),
    ]
    for response in calls:
        assert_error(response, 403, "forbidden")


def test_app_on_key_its_policy_does_not_name_is_403(
    client: TestClient,
    new_key: Callable[..., dict[str, Any]],
    new_principal: Callable[..., str],
    billing: dict[str, str],
) -> None:
    support = auth(new_principal("support"))
    secret = new_key("secret", use_policy("support"))
    text = _ciphertext(client, support, "secret")
    for ref in ("secret", secret["id"]):
        assert_error(client.get(f"/v1/keys/{ref}", headers=billing), 403, "forbidden")
        response = client.post(f"/v1/keys/{ref}/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
        assert_error(response, 403, "forbidden")
        response = client.post(f"/v1/keys/{ref}/decrypt", json={"ciphertext": text}, headers=billing)
        assert_error(response, 403, "forbidden")
    assert_error(client.post("/v1/decrypt", json={"ciphertext": text}, headers=billing), 403, "forbidden")
    assert client.post("/v1/decrypt", json={"ciphertext": text}, headers=support).status_code == 200


def test_operations_are_granted_one_by_one(
    client: TestClient,
    new_key: Callable[..., dict[str, Any]],
    new_principal: Callable[..., str],
    admin: dict[str, str],
) -> None:
    writer = auth(new_principal("writer"))
    reader = auth(new_principal("reader"))
    new_key("cards", {"encrypt": ["writer"], "decrypt": ["reader"], "mac": ["writer"]})
    text = _ciphertext(client, writer)
    assert_error(client.post("/v1/decrypt", json={"ciphertext": text}, headers=writer), 403, "forbidden")
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=reader)
    assert_error(response, 403, "forbidden")
    assert client.post("/v1/decrypt", json={"ciphertext": text}, headers=reader).json() == {"plaintext": b64(CARD)}
    # Admins manage every key but use one only where its policy names them.
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=admin)
    assert_error(response, 403, "forbidden")
    assert_error(client.post("/v1/decrypt", json={"ciphertext": text}, headers=admin), 403, "forbidden")
    assert client.get("/v1/keys/cards", headers=admin).status_code == 200


def test_lists_show_an_app_only_keys_its_policy_names(
    client: TestClient,
    new_key: Callable[..., dict[str, Any]],
    new_principal: Callable[..., str],
    admin: dict[str, str],
    billing: dict[str, str],
) -> None:
    support = auth(new_principal("support"))
    auditor = auth(new_principal("auditor", "auditor"))
    new_key("a-billing", {"encrypt": ["billing"]})
    new_key("b-shared", {"decrypt": ["billing", "support"]})
    new_key("c-support", use_policy("support"))
    new_key("d-mac", {"mac": ["billing"]}, "HMAC_SHA256")
    new_key("e-nobody")

    def names(headers: dict[str, str]) -> list[str]:
        response = client.get("/v1/keys", headers=headers)
        assert response.status_code == 200, response.text
        return [k["name"] for k in response.json()]

    assert names(admin) == ["a-billing", "b-shared", "c-support", "d-mac", "e-nobody"]
    assert names(billing) == ["a-billing", "b-shared", "d-mac"]
    assert names(support) == ["b-shared", "c-support"]
    assert names(auditor) == []
    assert client.get("/v1/keys/a-billing", headers=billing).json()["policy"]["encrypt"] == ["billing"]
    # A policy change takes effect at once.
    response = client.patch("/v1/keys/e-nobody", json={"policy": {"encrypt": ["support"]}}, headers=admin)
    assert response.status_code == 200
    assert names(support) == ["b-shared", "c-support", "e-nobody"]
    assert names(billing) == ["a-billing", "b-shared", "d-mac"]


def test_policy_not_before_and_not_after(
    client: TestClient, new_key: Callable[..., dict[str, Any]], admin: dict[str, str], billing: dict[str, str]
) -> None:
    now = datetime.now(UTC)
    future = {**use_policy("billing"), "not_before": (now + timedelta(days=1)).isoformat()}
    past = {**use_policy("billing"), "not_after": (now - timedelta(seconds=1)).isoformat()}
    current = {
        **use_policy("billing"),
        "not_before": (now - timedelta(days=1)).isoformat(),
        "not_after": (now + timedelta(days=1)).isoformat(),
    }
    new_key("future", future)
    new_key("past", past)
    new_key("current", current)
    text = _ciphertext(client, billing, "current")
    for name in ("future", "past"):
        response = client.post(f"/v1/keys/{name}/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
        assert_error(response, 403, "forbidden")
    assert client.post("/v1/keys/current/decrypt", json={"ciphertext": text}, headers=billing).status_code == 200
    # The window is stored and returned as given.
    key = client.get("/v1/keys/current", headers=billing).json()
    assert datetime.fromisoformat(key["policy"]["not_after"]) == datetime.fromisoformat(current["not_after"])

    # Closing the window stops decryption, too; reopening it restores it.
    closed = {**use_policy("billing"), "not_after": (now - timedelta(hours=1)).isoformat()}
    assert client.patch("/v1/keys/current", json={"policy": closed}, headers=admin).status_code == 200
    assert_error(client.post("/v1/keys/current/decrypt", json={"ciphertext": text}, headers=billing), 403, "forbidden")
    assert_error(client.post("/v1/decrypt", json={"ciphertext": text}, headers=billing), 403, "forbidden")
    # Outside its window the key is still listed for the app it names.
    assert "current" in [k["name"] for k in client.get("/v1/keys", headers=billing).json()]
    assert client.patch("/v1/keys/current", json={"policy": current}, headers=admin).status_code == 200
    assert client.post("/v1/decrypt", json={"ciphertext": text}, headers=billing).status_code == 200


def test_public_routes(client: TestClient) -> None:
    response = client.get("/v1/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert response.headers["x-request-id"]
    response = client.get("/v1/ready")
    assert response.status_code == 200 and response.json() == {"status": "ok", "hsm": "ok", "database": "ok"}


def test_request_ids_are_unique(client: TestClient) -> None:
    ids = {client.get("/v1/keys").headers["x-request-id"] for _ in range(5)}
    assert len(ids) == 5


def test_unexpected_error_is_a_plain_500(
    lenient_client: TestClient, services: Any, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("internal detail 4111111111111111")

    monkeypatch.setattr(services.keys, "list", broken)
    response = lenient_client.get("/v1/keys", headers=admin)
    assert_error(response, 500, "internal_error", "internal error")
    assert "4111111111111111" not in response.text and "RuntimeError" not in response.text


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast path", "through FastAPI"])
def test_an_unexpected_error_in_a_hot_route_is_a_plain_500_recorded_once(
    services: Services,
    billing: dict[str, str],
    cards: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    fast_path: bool,
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("internal detail 4111111111111111")

    monkeypatch.setattr(services.crypto, "encrypt", broken)
    settings = services.settings.model_copy(update={"fast_path": fast_path})
    strict = TestClient(create_app(settings, services=services), base_url="https://testserver")
    with strict, pytest.raises(RuntimeError):  # after the answer, on to the server, which logs it
        strict.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
    with TestClient(
        create_app(settings, services=services), base_url="https://testserver", raise_server_exceptions=False
    ) as client:
        response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
    assert_error(response, 500, "internal_error", "internal error")
    assert "4111111111111111" not in response.text and "RuntimeError" not in response.text
    records = [r.entry for r in services.audit_records.query(AuditQuery(action="key.encrypt", limit=100))]
    assert [(r.status, r.outcome) for r in records] == [(500, Outcome.ERROR)] * 2
    assert records[-1].request_id == response.headers["x-request-id"]
