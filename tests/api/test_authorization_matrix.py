"""Who may do what over REST: every route's answer to each role (admin, app, auditor).

The roles' rights are decided in the services (``services/authorization.py``), the key rights
by each key's policy; this table is what a caller of each role sees, whichever layer decides.
The app principal ``matrix-app`` is named in the key ``cards``'s policy; the admin is not (an
admin manages every key but uses a key only where its policy names it).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import auth

ROLES = ("app", "auditor", "admin")
"""In this order: a change an admin may make is tried last, after the refusals of the others."""
POLICY = {op: ["matrix-app"] for op in ("encrypt", "decrypt", "generate_data_key", "reencrypt")}
PLAINTEXT = base64.b64encode(b"4111 1111 1111 1111").decode()

# (method, path, body) → status for app, auditor, admin
MATRIX: list[tuple[str, str, dict[str, Any] | None, tuple[int, int, int]]] = [
    ("GET", "/v1/health", None, (200, 200, 200)),
    ("GET", "/v1/principals", None, (403, 403, 200)),
    ("POST", "/v1/principals", {"name": "matrix-made", "role": "app"}, (403, 403, 201)),
    ("POST", "/v1/principals", {"name": 7}, (403, 403, 422)),
    ("DELETE", "/v1/principals/nobody", None, (403, 403, 404)),
    ("GET", "/v1/principals/matrix-app/access-keys", None, (403, 403, 200)),
    ("POST", "/v1/principals/nobody/access-keys", {}, (403, 403, 404)),
    ("DELETE", "/v1/principals/matrix-app/access-keys/AKIANOTAKEY0000000", None, (403, 403, 404)),
    ("POST", "/v1/keys", {"name": "matrix-made", "policy": {}}, (403, 403, 201)),
    ("POST", "/v1/keys", {}, (403, 403, 422)),
    ("GET", "/v1/keys", None, (200, 200, 200)),
    ("GET", "/v1/keys/cards", None, (200, 403, 200)),
    ("GET", "/v1/keys/nothing-here", None, (404, 404, 404)),
    ("PATCH", "/v1/keys/cards", {"description": "changed"}, (403, 403, 200)),
    ("PATCH", "/v1/keys/nothing-here", {"description": "changed"}, (403, 403, 404)),
    ("POST", "/v1/keys/cards/rotate", None, (403, 403, 200)),
    ("DELETE", "/v1/keys/doomed?pending_days=7", None, (403, 403, 200)),
    ("POST", "/v1/keys/doomed/cancel-deletion", None, (403, 403, 200)),
    ("POST", "/v1/keys/cards/import-parameters", {}, (403, 403, 409)),
    ("POST", "/v1/keys/cards/import", {"import_token": "x", "encrypted_key_material": "AAAA"}, (403, 403, 409)),
    ("POST", "/v1/keys/cards/encrypt", {"plaintext": PLAINTEXT}, (200, 403, 403)),
    ("POST", "/v1/keys/cards/datakey", {}, (200, 403, 403)),
    ("POST", "/v1/keys/cards/encrypt/batch", {"items": [{"plaintext": PLAINTEXT}]}, (200, 403, 403)),
    ("GET", "/v1/objects", None, (200, 200, 200)),
    ("GET", "/v1/objects/" + "0" * 32, None, (404, 404, 404)),
    ("DELETE", "/v1/objects/" + "0" * 32, None, (404, 403, 404)),
    ("GET", "/v1/audit", None, (403, 200, 200)),
    ("GET", "/v1/audit/verify", None, (403, 200, 200)),
    ("GET", "/metrics", None, (403, 200, 200)),
    ("GET", "/v1/inventory/keys", None, (403, 200, 200)),
    ("GET", "/v1/inventory/keys?key=cards", None, (403, 200, 200)),
    ("GET", "/v1/inventory/keys/cards/hsm-objects", None, (403, 200, 200)),
    ("GET", "/v1/inventory/service", None, (403, 200, 200)),
]


@pytest.fixture
def callers(
    client: TestClient, admin: dict[str, str], new_principal: Callable[..., str], new_key: Callable[..., Any]
) -> dict[str, dict[str, str]]:
    """Headers of one principal of each role, with the keys ``cards`` and ``doomed`` made."""
    new_key("cards", POLICY)
    new_key("doomed", {})
    headers = {"app": auth(new_principal("matrix-app")), "auditor": auth(new_principal("matrix-auditor", "auditor"))}
    return {**headers, "admin": admin}


def test_every_route_answers_each_role_as_before(client: TestClient, callers: dict[str, dict[str, str]]) -> None:
    seen = []
    for method, path, body, expected in MATRIX:
        answers = tuple(client.request(method, path, json=body, headers=callers[role]).status_code for role in ROLES)
        seen.append((method, path, answers))
        assert answers == expected, (method, path, body)
    assert len(seen) == len(MATRIX)


def test_ciphertexts_open_only_for_whom_the_policy_names(
    client: TestClient, callers: dict[str, dict[str, str]]
) -> None:
    sealed = client.post("/v1/keys/cards/encrypt", json={"plaintext": PLAINTEXT}, headers=callers["app"]).json()
    body = {"ciphertext": sealed["ciphertext"]}
    for path in ("/v1/decrypt", "/v1/keys/cards/decrypt", "/v1/keys/cards/reencrypt"):
        answers = tuple(client.post(path, json=body, headers=callers[role]).status_code for role in ROLES)
        assert answers == (200, 403, 403), path


def test_a_role_refusal_is_audited_as_denied_naming_the_caller(
    client: TestClient, callers: dict[str, dict[str, str]]
) -> None:
    assert client.patch("/v1/keys/cards", json={"description": "x"}, headers=callers["app"]).status_code == 403
    records = client.get("/v1/audit", params={"action": "key.update"}, headers=callers["auditor"]).json()["records"]
    refused = records[-1]
    assert (refused["principal"], refused["outcome"], refused["status"]) == ("matrix-app", "denied", 403)
    assert refused["key_id"] is not None and refused["details"] == {"key": "cards"}
