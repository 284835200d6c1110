"""Fixtures of the SDK tests: a real ``keymanager serve`` over TLS (the session's ``server``), admin and app clients.

Each test makes its own keys and principals with unique names, so tests do not depend on one another.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from keymanager_sdk import Key, KeyManager, Policy

from tests.e2e.conftest import Server


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class App:
    """An application principal and its bearer token."""

    name: str
    token: str


@pytest.fixture(scope="session")
def admin(server: Server) -> Iterator[KeyManager]:
    with KeyManager(server.url, token=server.admin_token, ca=str(server.ca)) as client:
        yield client


@pytest.fixture(scope="session")
def app_principal(admin: KeyManager) -> App:
    created = admin.create_principal(unique("sdk-app"), "app")
    return App(created.name, created.token)


@pytest.fixture(scope="session")
def app(server: Server, app_principal: App) -> Iterator[KeyManager]:
    with KeyManager(server.url, token=app_principal.token, ca=str(server.ca)) as client:
        yield client


@pytest.fixture
def make_key(admin: KeyManager, app_principal: App) -> Callable[..., Key]:
    """Create a key whose policy lets the app principal do everything."""

    def make(algorithm: str | None = None, **extra: object) -> Key:
        names = (app_principal.name,)
        policy = Policy(encrypt=names, decrypt=names, generate_data_key=names, reencrypt=names, mac=names)
        return admin.create_key(unique("sdk-key"), algorithm, policy=policy, **extra)  # type: ignore[arg-type]

    return make
