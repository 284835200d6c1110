"""Format-preserving tokens over the API: FF1_AES_256 keys, tokenize/detokenize, batches, audit.

Through the real SoftHSM token and SQLite (the ``client`` fixture's services).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.domain.audit import AuditQuery
from keymanager.domain.tokens import luhn_residue
from keymanager.services.container import Services
from tests.api.support import assert_error, b64
from tests.conftest import auth

CARD = "4111111111111111"
CARD_FORMAT = {"alphabet": "digits", "keep_first": 0, "keep_last": 4, "luhn": "valid"}
TOKEN_POLICY = {"tokenize": ["billing"], "detokenize": ["billing"]}


@pytest.fixture
def billing(new_principal: Callable[..., str]) -> dict[str, str]:
    return auth(new_principal("billing"))


@pytest.fixture
def token_key(client: TestClient, admin: dict[str, str]) -> Callable[..., dict[str, Any]]:
    def make(name: str, fmt: dict[str, Any] | None = None, policy: dict[str, Any] | None = None) -> dict[str, Any]:
        body = {"name": name, "algorithm": "FF1_AES_256", "token_format": fmt or CARD_FORMAT}
        response = client.post(
            "/v1/keys", json=body | {"policy": TOKEN_POLICY if policy is None else policy}, headers=admin
        )
        assert response.status_code == 201, response.text
        key: dict[str, Any] = response.json()
        return key

    return make


def _tokenize(client: TestClient, headers: dict[str, str], key: str, value: str, **extra: Any) -> Any:
    return client.post(f"/v1/keys/{key}/tokenize", json={"value": value, **extra}, headers=headers)


def _detokenize(client: TestClient, headers: dict[str, str], key: str, token: str, **extra: Any) -> Any:
    return client.post(f"/v1/keys/{key}/detokenize", json={"token": token, **extra}, headers=headers)


def test_card_number_round_trip(
    client: TestClient, token_key: Callable[..., dict[str, Any]], billing: dict[str, str]
) -> None:
    key = token_key("cards")
    assert key["algorithm"] == "FF1_AES_256" and key["token_format"] == CARD_FORMAT
    made = _tokenize(client, billing, "cards", CARD)
    assert made.status_code == 200, made.text
    body = made.json()
    token = body["token"]
    assert body["key_id"] == key["id"] and body["key_version"] == 1
    assert len(token) == 16 and token.endswith("1111") and token != CARD and luhn_residue(token) == 0
    assert _tokenize(client, billing, "cards", CARD).json()["token"] == token  # deterministic
    back = _detokenize(client, billing, "cards", token)
    assert back.status_code == 200 and back.json() == {"value": CARD}


def test_context_and_tweak(
    client: TestClient, token_key: Callable[..., dict[str, Any]], billing: dict[str, str]
) -> None:
    token_key("cards")
    plain = _tokenize(client, billing, "cards", CARD).json()["token"]
    tenant = _tokenize(client, billing, "cards", CARD, context={"tenant": "a"}).json()["token"]
    assert tenant != plain
    assert _tokenize(client, billing, "cards", CARD, tweak=b64(b"")).json()["token"] == plain
    assert _detokenize(client, billing, "cards", tenant, context={"tenant": "a"}).json() == {"value": CARD}
    assert _detokenize(client, billing, "cards", tenant).json() != {"value": CARD}
    both = _tokenize(client, billing, "cards", CARD, context={"a": "b"}, tweak=b64(b"x"))
    assert_error(both, 400, "invalid_request")
    assert_error(_tokenize(client, billing, "cards", CARD, tweak="***"), 400, "invalid_request")
    assert_error(_tokenize(client, billing, "cards", CARD, tweak=b64(bytes(33))), 400, "invalid_request")


def test_rotation_new_tokens_old_ones_by_version(
    client: TestClient, token_key: Callable[..., dict[str, Any]], billing: dict[str, str], admin: dict[str, str]
) -> None:
    token_key("cards")
    old = _tokenize(client, billing, "cards", CARD).json()["token"]
    assert client.post("/v1/keys/cards/rotate", headers=admin).status_code == 200
    made = _tokenize(client, billing, "cards", CARD).json()
    assert made["key_version"] == 2 and made["token"] != old
    assert _detokenize(client, billing, "cards", made["token"]).json() == {"value": CARD}
    assert _detokenize(client, billing, "cards", old, key_version=1).json() == {"value": CARD}
    assert_error(_detokenize(client, billing, "cards", old, key_version=3), 400, "invalid_request")


def test_domain_rule_and_bad_values_are_400_naming_the_rule(
    client: TestClient, token_key: Callable[..., dict[str, Any]], billing: dict[str, str]
) -> None:
    token_key("bins", {"keep_first": 6, "keep_last": 4, "luhn": "valid"})
    body = assert_error(_tokenize(client, billing, "bins", CARD), 400, "invalid_request")
    assert "domain rule" in body["error"]["message"] and CARD not in json.dumps(body)
    token_key("cards")
    body = assert_error(_tokenize(client, billing, "cards", "4111111111111112"), 400, "invalid_request")
    assert "Luhn" in body["error"]["message"] and "4111111111111112" not in json.dumps(body)
    assert_error(_tokenize(client, billing, "cards", "4111x"), 400, "invalid_request")
    assert_error(_tokenize(client, billing, "cards", "1" * 65), 422, "invalid_request")


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"algorithm": "FF1_AES_256"}, 400),  # no token_format
        ({"algorithm": "AES_256_GCM", "token_format": CARD_FORMAT}, 400),
        ({"algorithm": "FF1_AES_256", "token_format": {"keep_first": 7}}, 422),
        ({"algorithm": "FF1_AES_256", "token_format": {"alphabet": "alphanumeric", "luhn": "valid"}}, 400),
        ({"algorithm": "FF1_AES_256", "token_format": {"radix": 10}}, 422),
    ],
)
def test_key_creation_checks_the_format(
    client: TestClient, admin: dict[str, str], services: Services, body: dict[str, Any], status: int
) -> None:
    response = client.post("/v1/keys", json={"name": "bad", **body}, headers=admin)
    assert_error(response, status, "invalid_request")
    assert client.get("/v1/keys/bad", headers=admin).status_code == 404  # nothing half-created


def test_policy_and_algorithm_are_enforced(
    client: TestClient,
    token_key: Callable[..., dict[str, Any]],
    new_key: Callable[..., dict[str, Any]],
    new_principal: Callable[..., str],
    billing: dict[str, str],
) -> None:
    support = auth(new_principal("support"))  # a policy names only principals that exist
    token_key("cards", policy={"tokenize": ["billing"], "detokenize": ["support"], "encrypt": ["billing"]})
    token = _tokenize(client, billing, "cards", CARD).json()["token"]
    assert_error(_detokenize(client, billing, "cards", token), 403, "forbidden")
    assert_error(_tokenize(client, support, "cards", CARD), 403, "forbidden")
    assert _detokenize(client, support, "cards", token).json() == {"value": CARD}
    encrypt = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(b"x")}, headers=billing)
    assert_error(encrypt, 400, "invalid_request")
    new_key("aes", {"tokenize": ["billing"]}, "AES_256_GCM")
    assert_error(_tokenize(client, billing, "aes", CARD), 400, "invalid_request")


def test_batches_per_item_errors(
    client: TestClient, token_key: Callable[..., dict[str, Any]], billing: dict[str, str]
) -> None:
    token_key("cards")
    items = [{"value": CARD}, {"value": "4111111111111112"}, {"value": "5555 5555 5555 4444", "context": {"t": "1"}}]
    items.append({"value": CARD, "tweak": "!!"})
    made = client.post("/v1/keys/cards/tokenize/batch", json={"items": items}, headers=billing)
    assert made.status_code == 200, made.text
    results = made.json()["results"]
    assert results[0]["token"] == _tokenize(client, billing, "cards", CARD).json()["token"]
    assert results[1]["error"]["code"] == "invalid_request" and results[3]["error"]["code"] == "invalid_request"
    assert results[2]["token"][4] == " " and results[2]["token"].endswith("4444")
    back = client.post(
        "/v1/keys/cards/detokenize/batch",
        json={"items": [{"token": results[0]["token"]}, {"token": results[2]["token"], "context": {"t": "1"}}]},
        headers=billing,
    )
    assert [r["value"] for r in back.json()["results"]] == [CARD, "5555 5555 5555 4444"]
    too_many = client.post("/v1/keys/cards/tokenize/batch", json={"items": [{"value": CARD}] * 1001}, headers=billing)
    assert_error(too_many, 413, "payload_too_large")


def test_every_call_is_audited_without_values_or_tokens(
    client: TestClient, token_key: Callable[..., dict[str, Any]], billing: dict[str, str], services: Services
) -> None:
    key = token_key("cards")
    token = _tokenize(client, billing, "cards", CARD).json()["token"]
    _detokenize(client, billing, "cards", token)
    _tokenize(client, billing, "cards", "4111111111111112")
    client.post("/v1/keys/cards/tokenize/batch", json={"items": [{"value": CARD}]}, headers=billing)
    records = [r.fields() for r in services.audit_records.query(AuditQuery(limit=1000))]
    actions = [(r["action"], r["outcome"], r["key_id"], r["key_version"]) for r in records if "tokenize" in r["action"]]
    assert [a[:2] for a in actions] == [
        ("key.tokenize", "ok"),
        ("key.detokenize", "ok"),
        ("key.tokenize", "error"),
        ("key.tokenize_batch", "ok"),
    ]
    assert actions[0][2:] == (key["id"], 1) and actions[1][2:] == (key["id"], 1)
    text = json.dumps(records, default=str)
    assert CARD not in text and token not in text and "4111111111111112" not in text
