"""Policies name principals by id: shown and given by name, never inherited through a reused name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from keymanager.services.container import Services
from tests.api.support import assert_error, b64, use_policy
from tests.conftest import auth


def _encrypt(client: TestClient, headers: dict[str, str]) -> str:
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(b"4111")}, headers=headers)
    assert response.status_code == 200, response.text
    text: str = response.json()["ciphertext"]
    return text


def test_a_new_principal_under_a_deleted_ones_name_gets_nothing(
    client: TestClient, admin: dict[str, str], new_principal: Callable[..., str], new_key: Callable[..., Any]
) -> None:
    old = auth(new_principal("billing"))
    new_key("cards", {**use_policy("billing"), "mac": ["billing"]})
    text = _encrypt(client, old)
    assert client.delete("/v1/principals/billing", headers=admin).status_code == 204
    new = auth(new_principal("billing"))
    assert_error(client.post("/v1/decrypt", json={"ciphertext": text}, headers=new), 403, "forbidden")
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(b"x")}, headers=new)
    assert_error(response, 403, "forbidden")
    assert_error(client.get("/v1/keys/cards", headers=new), 403, "forbidden")
    assert client.get("/v1/keys", headers=new).json() == []
    shown = client.get("/v1/keys/cards", headers=admin).json()["policy"]
    assert shown["encrypt"] == shown["decrypt"] == shown["mac"] == []
    # Naming the new principal again grants it, as for any principal.
    assert client.patch("/v1/keys/cards", json={"policy": use_policy("billing")}, headers=admin).status_code == 200
    assert client.post("/v1/decrypt", json={"ciphertext": text}, headers=new).status_code == 200


def test_policies_are_stored_by_id_and_shown_by_name(
    client: TestClient,
    admin: dict[str, str],
    new_principal: Callable[..., str],
    new_key: Callable[..., Any],
    services: Services,
) -> None:
    new_principal("billing")
    new_principal("support")
    created = new_key("cards", {"encrypt": ["billing"], "decrypt": ["support", "billing"]})
    assert created["policy"]["encrypt"] == ["billing"] and created["policy"]["decrypt"] == ["billing", "support"]
    ids = {p.name: p.id for p in services.principals.list()}
    stored = services.store.get_key("cards")
    assert stored is not None
    assert stored.policy.to_dict()["decrypt"] == sorted([ids["billing"], ids["support"]])
    listed = client.get("/v1/keys", headers=admin).json()
    assert listed[0]["policy"]["decrypt"] == ["billing", "support"]
    patched = client.patch("/v1/keys/cards", json={"policy": {"mac": ["support"]}}, headers=admin).json()
    assert patched["policy"]["mac"] == ["support"] and patched["policy"]["decrypt"] == []


def test_a_policy_may_name_only_existing_app_and_admin_principals(
    client: TestClient, admin: dict[str, str], new_principal: Callable[..., str], new_key: Callable[..., Any]
) -> None:
    new_principal("billing")
    new_principal("watcher", "auditor")
    response = client.post("/v1/keys", json={"name": "cards", "policy": use_policy("billing", "nobody")}, headers=admin)
    body = assert_error(response, 400, "invalid_request")
    assert "nobody" in body["error"]["message"] and "billing" not in body["error"]["message"]
    response = client.post("/v1/keys", json={"name": "cards", "policy": {"decrypt": ["watcher"]}}, headers=admin)
    assert_error(response, 400, "invalid_request")
    assert_error(client.get("/v1/keys/cards", headers=admin), 404, "key_not_found")
    new_key("cards", use_policy("billing", "admin"))
    response = client.patch("/v1/keys/cards", json={"policy": {"encrypt": ["watcher"]}}, headers=admin)
    assert_error(response, 400, "invalid_request")
    assert client.get("/v1/keys/cards", headers=admin).json()["policy"]["encrypt"] == ["admin", "billing"]
    # An admin named by the policy may use the key, as the contract says.
    _encrypt(client, admin)


def test_an_error_lists_at_most_five_unknown_names(client: TestClient, admin: dict[str, str]) -> None:
    names = [f"ghost{i}" for i in range(8)]
    response = client.post("/v1/keys", json={"name": "cards", "policy": {"encrypt": names}}, headers=admin)
    body = assert_error(response, 400, "invalid_request")
    assert "ghost5" not in body["error"]["message"] and "3 more" in body["error"]["message"]


def test_policy_lists_are_bounded(client: TestClient, admin: dict[str, str]) -> None:
    response = client.post("/v1/keys", json={"name": "k", "policy": {"encrypt": ["a"] * 1001}}, headers=admin)
    assert_error(response, 422, "invalid_request")
    response = client.post("/v1/keys", json={"name": "k", "policy": {"encrypt": ["a" * 65]}}, headers=admin)
    assert_error(response, 422, "invalid_request")
