"""Cached principals and keys never outlive a change: the audit commit checks the metadata version."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient

from keymanager.domain.audit import AuditQuery
from keymanager.domain.models import KeyState
from keymanager.services.container import Services
from tests.api.support import assert_error, b64
from tests.conftest import auth


def setup(client: TestClient, admin_token: str) -> str:
    made = client.post("/v1/principals", json={"name": "billing", "role": "app"}, headers=auth(admin_token))
    assert made.status_code == 201, made.text
    policy = {"encrypt": ["billing"], "decrypt": ["billing"]}
    key = client.post("/v1/keys", json={"name": "cards", "policy": policy}, headers=auth(admin_token))
    assert key.status_code == 201, key.text
    return str(made.json()["token"])


def encrypt(client: TestClient, token: str) -> httpx.Response:
    return client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(b"4111")}, headers=auth(token))


def outcomes(services: Services) -> list[tuple[str, int]]:
    records = services.audit_records.query(AuditQuery(action="key.encrypt", limit=1000))
    return [(r.entry.outcome.value, r.entry.status) for r in records]


def test_a_change_behind_the_cache_applies_to_the_next_request(
    client: TestClient, services: Services, admin_token: str
) -> None:
    token = setup(client, admin_token)
    assert encrypt(client, token).status_code == 200  # the cache now holds the principal and the key
    key = services.keys.find("cards")
    services.store.update_key(key.id, state=KeyState.DISABLED)  # as another replica would, not through this cache

    assert_error(encrypt(client, token), 409, "key_disabled")
    assert outcomes(services) == [("ok", 200), ("error", 409)]  # the stale attempt left no record

    services.store.update_key(key.id, state=KeyState.ENABLED)
    assert encrypt(client, token).status_code == 200
    services.store.delete_principal("billing")
    assert_error(encrypt(client, token), 401, "unauthenticated")
    assert services.audit_records.verify().ok


def test_a_refusal_from_the_cache_is_checked_against_the_database(
    client: TestClient, services: Services, admin_token: str
) -> None:
    token = setup(client, admin_token)
    key = services.keys.find("cards")
    services.store.update_key(key.id, state=KeyState.DISABLED)
    assert_error(encrypt(client, token), 409, "key_disabled")  # now cached as disabled
    services.store.update_key(key.id, state=KeyState.ENABLED)
    assert encrypt(client, token).status_code == 200


def test_reencryption_and_streams_see_a_change_behind_the_cache(
    client: TestClient, services: Services, admin_token: str
) -> None:
    token = setup(client, admin_token)
    key = services.keys.find("cards")
    policy = {"encrypt": ["billing"], "decrypt": ["billing"], "reencrypt": ["billing"]}
    assert client.patch("/v1/keys/cards", json={"policy": policy}, headers=auth(admin_token)).status_code == 200
    octets = {**auth(token), "Content-Type": "application/octet-stream"}
    ciphertext = encrypt(client, token).json()["ciphertext"]
    stream = client.post("/v1/keys/cards/encrypt/stream", content=b"x" * 100, headers=octets)
    assert stream.status_code == 200, stream.text
    moved = client.post("/v1/keys/cards/reencrypt", json={"ciphertext": ciphertext}, headers=auth(token))
    assert moved.status_code == 200, moved.text  # the cache now holds the principal and the key
    services.store.update_key(key.id, state=KeyState.DISABLED)  # as another replica would, not through this cache

    again = client.post("/v1/keys/cards/reencrypt", json={"ciphertext": ciphertext}, headers=auth(token))
    assert_error(again, 409, "key_disabled")
    assert_error(client.post("/v1/keys/cards/encrypt/stream", content=b"x", headers=octets), 409, "key_disabled")
    opened = client.post("/v1/keys/cards/decrypt/stream", content=stream.content, headers=octets)
    assert_error(opened, 409, "key_disabled")
    assert services.spool.used == 0  # refused before a byte was spooled
    records = services.audit_reader.query(AuditQuery(action="key.reencrypt", limit=10))
    assert [(r.entry.outcome.value, r.entry.status) for r in records] == [("ok", 200), ("error", 409)]
    for action in ("key.encrypt_stream", "key.decrypt_stream"):
        statuses = [r.entry.status for r in services.audit_reader.query(AuditQuery(action=action, limit=10))]
        assert statuses == ([200, 409] if action == "key.encrypt_stream" else [409])
    assert services.audit_reader.verify().ok
