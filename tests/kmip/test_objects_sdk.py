"""The objects registered over KMIP, through the SDK (``list_objects``, ``get_object``,
``destroy_object``, sync and async) and ``kmctl objects`` on the same real server: a PyKMIP client
registers and revokes, the SDK presents the same principal's client certificate."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import keymanager_sdk as km
import pytest
from kmip import enums

from tests.kmip.server_fixtures import OWNER, STRANGER, KmipServer, kmip_server
from tests.kmip.test_objects_over_rest import secret
from tests.sdk.test_kmctl import kmctl

__all__ = ["kmip_server", "secret"]


def credentials(kmip_server: KmipServer, name: str) -> dict[str, str]:
    """A client's options presenting principal ``name``'s client certificate (the one its KMIP client presents)."""
    cert, key = kmip_server.certs[name]
    return {"ca": str(kmip_server.server.ca), "client_cert": str(cert), "client_key": str(key)}


def sdk(kmip_server: KmipServer, name: str) -> km.KeyManager:
    """A ``KeyManager`` that is principal ``name``."""
    return km.KeyManager(kmip_server.server.url, **credentials(kmip_server, name))


def test_the_sdk_reads_the_object_and_destroys_it_once_revoked(kmip_server: KmipServer, secret: str) -> None:
    with sdk(kmip_server, OWNER) as owner:
        assert secret in [found.id for found in owner.list_objects()]
        shown = owner.get_object(secret)
        assert isinstance(shown, km.ManagedObject)
        assert (shown.id, shown.object_type, shown.state, shown.owner) == (secret, "secret_data", "active", OWNER)
        assert isinstance(shown.created_at, datetime) and shown.created_at.tzinfo is not None
        with pytest.raises(km.Conflict) as active:
            owner.destroy_object(secret)
        assert "revoke it before destroying it" in active.value.message
        assert owner.get_object(secret).state == "active"
        with kmip_server.connected(OWNER) as kmip:
            kmip.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, secret)
        destroyed = owner.destroy_object(secret)
        assert (destroyed.id, destroyed.state) == (secret, "destroyed")
        assert destroyed.updated_at >= shown.updated_at
        with pytest.raises(km.Conflict):
            owner.destroy_object(secret)
    with sdk(kmip_server, STRANGER) as stranger, pytest.raises(km.NotFound):
        stranger.get_object(secret)


def test_the_async_client_lists_and_reads_it(kmip_server: KmipServer, secret: str) -> None:
    async def read() -> tuple[list[km.ManagedObject], km.ManagedObject]:
        async with km.AsyncKeyManager(kmip_server.server.url, **credentials(kmip_server, OWNER)) as owner:
            return await owner.list_objects(), await owner.get_object(secret)

    listed, shown = asyncio.run(read())
    assert secret in [found.id for found in listed]
    assert (shown.object_type, shown.state, shown.owner) == ("secret_data", "active", OWNER)


def test_kmctl_lists_and_shows_it(kmip_server: KmipServer, secret: str) -> None:
    table = kmctl(kmip_server.server, "objects", "list")  # as the admin, who sees every object
    assert table.returncode == 0, table.stderr.decode()
    header, *rows = table.stdout.decode().splitlines()
    assert header.split() == ["ID", "OBJECT_TYPE", "STATE", "OWNER", "CREATED_AT", "UPDATED_AT"]
    assert [secret, "secret_data", "active", OWNER] in [row.split()[:4] for row in rows]
    got = kmctl(kmip_server.server, "objects", "get", secret, "--json")
    assert got.returncode == 0, got.stderr.decode()
    shown = json.loads(got.stdout)
    assert {name: shown[name] for name in ("id", "object_type", "state", "owner")} == {
        "id": secret,
        "object_type": "secret_data",
        "state": "active",
        "owner": OWNER,
    }
    refused = kmctl(kmip_server.server, "objects", "destroy", secret)
    assert refused.returncode == 1 and b"revoke it before destroying it" in refused.stderr
