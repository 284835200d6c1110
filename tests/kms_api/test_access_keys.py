"""``/v1/principals/{name}/access-keys``: shown once, stored sealed, revoked at once everywhere."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import Server
from tests.kms_api.conftest import KmsFactory, Pair, new_pair


def test_create_list_delete(kms_server: Server) -> None:
    pair = new_pair(kms_server, "ak-basic", "app")
    assert pair.access_key_id.startswith("KMAK") and len(pair.access_key_id) == 20
    assert len(pair.secret_access_key) >= 40
    with kms_server.client(kms_server.admin_token) as admin:
        listed = admin.get("/v1/principals/ak-basic/access-keys")
        assert listed.status_code == 200
        assert [k["access_key_id"] for k in listed.json()] == [pair.access_key_id]
        assert "secret_access_key" not in listed.text and pair.secret_access_key not in listed.text
        assert admin.delete(f"/v1/principals/ak-basic/access-keys/{pair.access_key_id}").status_code == 204
        assert admin.get("/v1/principals/ak-basic/access-keys").json() == []
        gone = admin.delete(f"/v1/principals/ak-basic/access-keys/{pair.access_key_id}")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
        bare = admin.post("/v1/principals/ak-basic/access-keys")  # no body: a generated pair too
        assert bare.status_code == 201 and len(bare.json()["secret_access_key"]) == 40
        assert [k["access_key_id"] for k in admin.get("/v1/principals/ak-basic/access-keys").json()] == [
            bare.json()["access_key_id"]
        ]
        assert admin.get("/v1/principals/nobody/access-keys").status_code == 404
        assert admin.post("/v1/principals/nobody/access-keys", json={}).status_code == 404


def test_a_given_pair_is_registered_and_checked(kms_server: Server, kms_client: KmsFactory) -> None:
    with kms_server.client(kms_server.admin_token) as admin:
        assert admin.post("/v1/principals", json={"name": "ak-given", "role": "admin"}).status_code == 201
        given = {
            "access_key_id": "AKIAIOSFODNN7EXAMPLE",
            "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        }
        made = admin.post("/v1/principals/ak-given/access-keys", json=given)
        assert made.status_code == 201 and made.json()["access_key_id"] == given["access_key_id"]
        again = admin.post("/v1/principals/ak-given/access-keys", json=given)
        assert again.status_code == 409
        for bad in (
            {"access_key_id": "SHORT", "secret_access_key": "s" * 40},
            {"access_key_id": "akiaiosfodnn7example", "secret_access_key": "s" * 40},
            {"access_key_id": "AKIAIOSFODNN7EXAMPL2", "secret_access_key": "s" * 39},
            {"access_key_id": "AKIAIOSFODNN7EXAMPL2", "secret_access_key": "s" * 39 + " "},
            {"access_key_id": "AKIAIOSFODNN7EXAMPL2"},
        ):
            refused = admin.post("/v1/principals/ak-given/access-keys", json=bad)
            assert refused.status_code == 400, bad
            assert "s" * 39 not in refused.text
    pair = Pair("ak-given", given["access_key_id"], given["secret_access_key"])
    assert "Keys" in kms_client(pair).list_keys()


def test_only_admins_manage_access_keys(kms_server: Server) -> None:
    with kms_server.client(kms_server.admin_token) as admin:
        token = admin.post("/v1/principals", json={"name": "ak-app", "role": "app"}).json()["token"]
    with kms_server.client(token) as app:
        assert app.post("/v1/principals/ak-app/access-keys", json={}).status_code == 403
        assert app.get("/v1/principals/ak-app/access-keys").status_code == 403


def test_the_secret_is_never_stored_in_clear(kms_server: Server) -> None:
    pair = new_pair(kms_server, "ak-sealed", "app")
    database = kms_server.var_dir / "keymanager.db"
    found = sorted(kms_server.var_dir.rglob("*.db"))
    database = found[0] if found else database
    with sqlite3.connect(database) as connection:
        row = connection.execute(
            "SELECT sealed_secret, wrap_label FROM access_keys WHERE id = ?", (pair.access_key_id,)
        ).fetchone()
        dump = "\n".join(connection.iterdump())
    sealed, label = row
    assert label.startswith("km/access-keys/") and label.endswith("/aes")
    assert pair.secret_access_key.encode() not in bytes(sealed) and len(sealed) == 12 + len(pair.secret_access_key) + 16
    assert pair.secret_access_key not in dump and pair.secret_access_key.encode().hex() not in dump.lower()
    assert pair.secret_access_key not in kms_server.log.read_text()


def test_revocation_applies_at_once_on_every_worker(kms_server: Server, kms_client: KmsFactory) -> None:
    pair = new_pair(kms_server, "ak-revoked", "app")
    client = kms_client(pair)
    for _ in range(8):  # both workers cache the access key and its secret
        client.list_keys()
    with kms_server.client(kms_server.admin_token) as admin:
        assert admin.delete(f"/v1/principals/ak-revoked/access-keys/{pair.access_key_id}").status_code == 204
    for _ in range(8):
        with pytest.raises(ClientError) as refused:
            client.generate_random(NumberOfBytes=4)  # the cached (snapshot) path
        assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"


def test_deleting_the_principal_revokes_its_keys(kms_server: Server, kms_client: KmsFactory) -> None:
    pair = new_pair(kms_server, "ak-deleted", "app")
    client: Any = kms_client(pair)
    for _ in range(8):
        client.generate_random(NumberOfBytes=4)
    with kms_server.client(kms_server.admin_token) as admin:
        assert admin.delete("/v1/principals/ak-deleted").status_code == 204
        # a new principal of the same name inherits nothing
        assert admin.post("/v1/principals", json={"name": "ak-deleted", "role": "app"}).status_code == 201
        assert admin.get("/v1/principals/ak-deleted/access-keys").json() == []
    for _ in range(8):
        with pytest.raises(ClientError) as refused:
            client.generate_random(NumberOfBytes=4)
        assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"


def test_access_key_changes_are_audited_without_secrets(kms_server: Server) -> None:
    pair = new_pair(kms_server, "ak-audited", "app")
    with kms_server.client(kms_server.admin_token) as admin:
        records = admin.get("/v1/audit", params={"limit": 1000}).json()
    records = records["records"] if isinstance(records, dict) else records
    assert any(r["action"] == "access_key.create" for r in records)
    assert pair.secret_access_key not in str(records)
