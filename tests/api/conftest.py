"""Fixtures of the API tests: principals and keys made through the API itself."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.services.container import Services
from tests.conftest import auth


@pytest.fixture
def admin(admin_token: str) -> dict[str, str]:
    """Headers of the admin."""
    return auth(admin_token)


@pytest.fixture
def lenient_client(services: Services) -> Iterator[TestClient]:
    """A client that answers a server error with its response instead of raising it."""
    app = create_app(services=services)
    with TestClient(app, base_url="https://testserver", raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def policy_principals() -> dict[str, str]:
    """Tokens of the app principals ``new_key`` created because a policy named them, by name."""
    return {}


@pytest.fixture
def new_principal(client: TestClient, admin: dict[str, str], policy_principals: dict[str, str]) -> Callable[..., str]:
    """Create a principal through the API (or take the app principal ``new_key`` made); returns its bearer token."""

    def make(name: str, role: str = "app") -> str:
        if role == "app" and name in policy_principals:
            return policy_principals.pop(name)
        response = client.post("/v1/principals", json={"name": name, "role": role}, headers=admin)
        assert response.status_code == 201, response.text
        token: str = response.json()["token"]
        return token

    return make


@pytest.fixture
def new_key(
    client: TestClient, admin: dict[str, str], policy_principals: dict[str, str]
) -> Callable[..., dict[str, Any]]:
    """Create a key through the API; returns the key object."""

    def make(name: str, policy: dict[str, Any] | None = None, algorithm: str | None = None) -> dict[str, Any]:
        _ensure_principals(client, admin, policy or {}, policy_principals)
        body: dict[str, Any] = {"name": name, "policy": policy or {}}
        if algorithm is not None:
            body["algorithm"] = algorithm
        response = client.post("/v1/keys", json=body, headers=admin)
        assert response.status_code == 201, response.text
        key: dict[str, Any] = response.json()
        return key

    return make


def _ensure_principals(client: TestClient, admin: dict[str, str], policy: dict[str, Any], made: dict[str, str]) -> None:
    """Create the app principals ``policy`` names that do not exist yet (a policy may name only
    existing principals), keeping their tokens in ``made``."""
    existing = {p["name"] for p in client.get("/v1/principals", headers=admin).json()}
    for names in policy.values():
        for name in names if isinstance(names, list) else ():
            if name not in existing:
                response = client.post("/v1/principals", json={"name": name, "role": "app"}, headers=admin)
                assert response.status_code == 201, response.text
                made[name] = response.json()["token"]
                existing.add(name)
