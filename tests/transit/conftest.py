"""The Vault Transit door's proofs run against the session's ``kms_server`` (``tests/conftest.py``: a real
two-worker server over TLS, with the door's default mount ``transit``), with other people's clients
(hvac, sops, confluent-kafka's ``hcvault`` driver) unmodified."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import hvac
import pytest

from tests.e2e.conftest import Server


@dataclass(frozen=True)
class App:
    """An app principal of the server: its name, bearer token, and an hvac client holding it."""

    name: str
    token: str
    vault: hvac.Client


def vault_client(server: Server, token: str | None) -> hvac.Client:
    """hvac 2.4.0 pointed at the server, trusting its development CA."""
    return hvac.Client(url=server.url, token=token, verify=str(server.ca), timeout=30)


@pytest.fixture(scope="session")
def transit_server(kms_server: Server) -> Server:
    return kms_server


@pytest.fixture
def admin_vault(transit_server: Server) -> Iterator[hvac.Client]:
    client = vault_client(transit_server, transit_server.admin_token)
    yield client
    client.adapter.close()


@pytest.fixture
def app(transit_server: Server) -> Iterator[App]:
    name = f"app-{secrets.token_hex(4)}"
    with transit_server.client(transit_server.admin_token) as admin:
        made = admin.post("/v1/principals", json={"name": name, "role": "app"})
        assert made.status_code == 201, made.text
    client = vault_client(transit_server, made.json()["token"])
    yield App(name, made.json()["token"], client)
    client.adapter.close()


def new_name(prefix: str = "t") -> str:
    return f"{prefix}-{secrets.token_hex(5)}"


def grant(server: Server, key: str, principal: str, *rights: str) -> None:
    """Name ``principal`` in key ``key``'s policy for ``rights`` (through the REST API, as an admin)."""
    with server.client(server.admin_token) as admin:
        policy = admin.get(f"/v1/keys/{key}").json()["policy"]
        for right in rights:
            policy[right] = sorted({*policy[right], principal})
        changed = admin.patch(f"/v1/keys/{key}", json={"policy": policy})
        assert changed.status_code == 200, changed.text
