"""The metadata cache: bounded, never grown by strangers, and only refusals stale metadata can
explain are looked at again (a wrong ciphertext costs one HSM call)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from keymanager.api.app import create_app
from keymanager.domain.credentials import Credential
from keymanager.domain.models import Role
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from keymanager.services.key_creation import NewKey
from keymanager.services.snapshot import MetadataCache
from tests.api.support import assert_error, b64
from tests.conftest import auth


class Calls:
    """SQL statements run and HSM calls made while counting."""

    def __init__(self, services: Services) -> None:
        self.sql: list[str] = []
        self.hsm: list[str] = []
        event.listen(services.store._engine, "before_cursor_execute", self._statement)
        services.hsm.observer = self._operation

    def _operation(self, operation: str, seconds: float, failed: bool) -> None:
        if operation != "seal":  # the audit chain's seal, once per commit: not the request's own work
            self.hsm.append(operation)

    def _statement(self, *args: Any) -> None:
        self.sql.append(str(args[2]).split()[0])

    def clear(self) -> None:
        self.sql.clear()
        self.hsm.clear()


@pytest.fixture
def billing(client: TestClient, admin_token: str) -> str:
    made = client.post("/v1/principals", json={"name": "billing", "role": "app"}, headers=auth(admin_token))
    policy = {"encrypt": ["billing"], "decrypt": ["billing"]}
    assert client.post("/v1/keys", json={"name": "cards", "policy": policy}, headers=auth(admin_token)).is_success
    assert client.post("/v1/keys", json={"name": "other", "policy": {}}, headers=auth(admin_token)).is_success
    return str(made.json()["token"])


@pytest.fixture
def replica(services: Services, hsm: Hsm) -> Iterator[TestClient]:
    """Another process on the same database and token, with a cache of its own."""
    other = Services.build(services.settings, hsm=hsm, run_migrations=False)
    with TestClient(create_app(services=other), base_url="https://testserver") as client:
        yield client
    other.close()


def encrypt(client: TestClient, token: str, key: str = "cards") -> str:
    response = client.post(f"/v1/keys/{key}/encrypt", json={"plaintext": b64(b"4111")}, headers=auth(token))
    assert response.status_code == 200, response.text
    return str(response.json()["ciphertext"])


def test_a_wrong_ciphertext_costs_one_hsm_call_and_no_metadata_read(
    client: TestClient, services: Services, billing: str
) -> None:
    text = encrypt(client, billing)
    assert client.post("/v1/keys/cards/decrypt", json={"ciphertext": text}, headers=auth(billing)).is_success
    prefix, _, body = text.rpartition(":")
    raw = bytearray(base64.b64decode(body))
    raw[-1] ^= 1
    calls = Calls(services)
    wrong = client.post(
        "/v1/keys/cards/decrypt", json={"ciphertext": f"{prefix}:{b64(bytes(raw))}"}, headers=auth(billing)
    )
    assert_error(wrong, 400, "decryption_failed")
    assert calls.hsm == ["decrypt"]
    assert calls.sql == []  # principal and key from the cache; the refusal is not one stale metadata explains


def test_a_refusal_from_a_current_cache_costs_one_version_read(
    client: TestClient, services: Services, billing: str
) -> None:
    encrypt(client, billing)
    client.post("/v1/keys/other/encrypt", json={"plaintext": "QQ=="}, headers=auth(billing))  # caches "other"
    calls = Calls(services)
    assert_error(
        client.post("/v1/keys/other/encrypt", json={"plaintext": "QQ=="}, headers=auth(billing)), 403, "forbidden"
    )
    assert calls.hsm == []
    assert calls.sql == ["SELECT"]  # the metadata version: still current, so the 403 stands


def test_a_version_made_behind_the_cache_still_decrypts(
    client: TestClient, replica: TestClient, admin_token: str, billing: str
) -> None:
    encrypt(client, billing)  # this process caches the key with version 1
    assert replica.post("/v1/keys/cards/rotate", headers=auth(admin_token)).is_success
    text = encrypt(replica, billing)
    assert text.split(":")[3] == "2"
    response = client.post("/v1/keys/cards/decrypt", json={"ciphertext": text}, headers=auth(billing))
    assert response.status_code == 200, response.text


def test_a_policy_change_behind_the_cache_applies_at_once(
    client: TestClient, replica: TestClient, admin_token: str, billing: str
) -> None:
    encrypt(client, billing, "cards")
    client.post("/v1/keys/other/encrypt", json={"plaintext": "QQ=="}, headers=auth(billing))  # cached: refused
    patch = {"policy": {"encrypt": ["billing"]}}
    assert replica.patch("/v1/keys/other", json=patch, headers=auth(admin_token)).is_success
    encrypt(client, billing, "other")


def test_the_cache_is_bounded_and_counts_evictions(services: Services, admin_token: str) -> None:
    seen: list[tuple[str, int, int]] = []
    cache = MetadataCache(services.store, max_principals=2, max_keys=3)
    cache.observer = lambda table, entries, evicted: seen.append((table, entries, evicted))
    tokens = [admin_token] + [services.principals.create(f"p{n}", Role.APP).token for n in range(3)]
    for name in ("k0", "k1", "k2"):
        services.keys.create(NewKey(name))

    async def look_up() -> None:
        snapshot = cache.snapshot(fresh=False)
        for token in tokens:
            await snapshot.principal(Credential.of_token(token))
        for name in ("k0", "k1", "k2"):
            await snapshot.key(name)  # name and id: two entries each

    asyncio.run(look_up())
    assert cache.sizes() == {"principals": 2, "keys": 3, "access_keys": 0}
    assert cache.evictions() == {"principals": 2, "keys": 3, "access_keys": 0}
    assert sum(evicted for table, _, evicted in seen if table == "keys") == 3
    assert max(entries for _, entries, _ in seen) <= 3
