"""The objects registered over KMIP, listed, read and destroyed over REST (``/v1/objects``) on the same
real server: the same rules of who sees them and when they may be destroyed as KMIP's, every call audited."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kmip import enums
from kmip.pie import objects
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import OWNER, STRANGER, KmipServer, kmip_server

__all__ = ["kmip_server"]


def rest(kmip_server: KmipServer, name: str) -> httpx.Client:
    """A REST client presenting principal ``name``'s client certificate (the one its KMIP client presents)."""
    cert, key = kmip_server.certs[name]
    return kmip_server.server.client(cert=(str(cert), str(key)))


@pytest.fixture
def secret(kmip_server: KmipServer) -> Iterator[str]:
    """The id of secret data registered and activated over KMIP by ``OWNER``."""
    with kmip_server.connected(OWNER) as owner:
        uid: str = owner.register(objects.SecretData(bytes(range(32)), enums.SecretDataType.PASSWORD))
        owner.activate(uid)
    yield uid


def records(kmip_server: KmipServer, action: str, uid: str) -> list[dict[str, Any]]:
    return [r for r in kmip_server.audit(action) if r["details"].get("object_id") == uid]


def test_the_owner_lists_and_reads_its_object_without_its_value(kmip_server: KmipServer, secret: str) -> None:
    with rest(kmip_server, OWNER) as owner:
        listed = owner.get("/v1/objects")
        got = owner.get(f"/v1/objects/{secret}")
    assert listed.status_code == 200 and secret in [o["id"] for o in listed.json()]
    assert got.status_code == 200, got.text
    shown = got.json()
    assert (shown["object_type"], shown["state"], shown["owner"]) == ("secret_data", "active", OWNER)
    assert set(shown) == {"id", "object_type", "state", "owner", "created_at", "updated_at"}
    [read] = records(kmip_server, "object.get", secret)
    assert (read["principal"], read["status"], read["key_id"]) == (OWNER, 200, secret)
    assert kmip_server.audit("object.list")[-1]["principal"] == OWNER


def test_a_stranger_neither_sees_nor_destroys_it_and_an_admin_sees_it(kmip_server: KmipServer, secret: str) -> None:
    with rest(kmip_server, STRANGER) as stranger:
        assert secret not in [o["id"] for o in stranger.get("/v1/objects").json()]
        hidden = stranger.get(f"/v1/objects/{secret}")
        refused = stranger.delete(f"/v1/objects/{secret}")
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (404, "not_found")
    assert refused.status_code == 404
    with kmip_server.admin() as admin:
        assert secret in [o["id"] for o in admin.get("/v1/objects").json()]
        assert admin.get(f"/v1/objects/{secret}").json()["owner"] == OWNER
    [denied] = records(kmip_server, "object.get", secret)[:1]
    assert (denied["principal"], denied["status"], denied["key_id"]) == (STRANGER, 404, None)


def test_an_active_object_is_destroyed_only_once_revoked(kmip_server: KmipServer, secret: str) -> None:
    with rest(kmip_server, OWNER) as owner:
        active = owner.delete(f"/v1/objects/{secret}")
        assert (active.status_code, active.json()["error"]["code"]) == (409, "conflict")
        assert "revoke it before destroying it" in active.json()["error"]["message"]
        assert owner.get(f"/v1/objects/{secret}").json()["state"] == "active"
        with kmip_server.connected(OWNER) as kmip:
            assert kmip.get(secret).value == bytes(range(32))  # nothing changed
            kmip.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, secret)
        destroyed = owner.delete(f"/v1/objects/{secret}")
        assert destroyed.status_code == 200, destroyed.text
        assert destroyed.json()["state"] == "destroyed"
        again = owner.delete(f"/v1/objects/{secret}")
        assert (again.status_code, again.json()["error"]["message"]) == (409, "the object is destroyed already")
    with kmip_server.connected(OWNER) as kmip:
        with pytest.raises(KmipOperationFailure) as gone:
            kmip.get(secret)
        assert gone.value.reason == enums.ResultReason.PERMISSION_DENIED  # as after KMIP's own Destroy
        assert "destroyed" in str(gone.value.message)
        _, found = kmip.get_attributes(secret, ["State", "Destroy Date"])
        values = {a.attribute_name.value: a.attribute_value.value for a in found}
        assert values["State"] == enums.State.DESTROYED and "Destroy Date" in values
        with pytest.raises(KmipOperationFailure) as twice:
            kmip.destroy(secret)
        assert str(twice.value.message) == "the object is destroyed already"
    answers = [(r["principal"], r["status"], r["key_id"]) for r in records(kmip_server, "object.destroy", secret)]
    assert answers == [(OWNER, 409, None), (OWNER, 200, secret), (OWNER, 409, None)]


def test_kmip_refuses_destroying_an_active_object_as_before(kmip_server: KmipServer, secret: str) -> None:
    with kmip_server.connected(OWNER) as kmip, pytest.raises(KmipOperationFailure) as refused:
        kmip.destroy(secret)
    assert refused.value.reason == enums.ResultReason.PERMISSION_DENIED
    assert str(refused.value.message) == "the object is active: revoke it before destroying it"
