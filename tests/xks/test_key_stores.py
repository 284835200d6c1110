"""Key stores as principals of role xks: how they are made, their credentials, and that they use nothing else."""

from __future__ import annotations

import re

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.e2e.conftest import Server
from tests.xks.conftest import REGION, KeyStore, Signer, health_path, metadata, new_key, new_store

HEALTH = {"requestMetadata": metadata("KmsHealthCheck")}


def test_creation_rules(xks_server: Server, store_a: KeyStore) -> None:
    with xks_server.client(xks_server.admin_token) as admin:
        bodies = (
            {"name": "ks-none", "role": "xks"},
            {"name": "ks-slash", "role": "xks", "xks_uri_prefix": "/leading"},
            {"name": "ks-dots", "role": "xks", "xks_uri_prefix": "a.b"},
            {"name": "ks-long", "role": "xks", "xks_uri_prefix": "a" * 117},
            {"name": "ks-api", "role": "xks", "xks_uri_prefix": "x/kms/xks/v1"},
            {"name": "ks-region", "role": "xks", "xks_uri_prefix": "ok", "xks_region": "Mars"},
            {"name": "ks-cert", "role": "xks", "xks_uri_prefix": "ok", "cert_subject": "CN=x"},
            {"name": "app-prefix", "role": "app", "xks_uri_prefix": "ok"},
            {"name": "app-region", "role": "app", "xks_region": "eu-west-1"},
        )
        for body in bodies:
            refused = admin.post("/v1/principals", json=body)
            assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_request"), body
        taken = admin.post("/v1/principals", json={"name": "ks-taken", "role": "xks", "xks_uri_prefix": store_a.prefix})
        assert (taken.status_code, taken.json()["error"]["code"]) == (409, "conflict")
        listed = {p["name"]: p for p in admin.get("/v1/principals").json()}
        assert listed[store_a.name]["role"] == "xks" and listed[store_a.name]["xks_uri_prefix"] == store_a.prefix
        assert listed[store_a.name]["xks_region"] == REGION
        assert not {str(body["name"]) for body in bodies} & listed.keys()  # a shared server: only these names


def test_credentials_follow_awss_rules(xks_server: Server, store_a: KeyStore) -> None:
    assert re.fullmatch(r"[A-Z2-7]{20,30}", store_a.access_key_id)
    assert re.fullmatch(r"[A-Za-z0-9/+=]{43,64}", store_a.secret_access_key)
    secret = "FYtE5EFA5FT0mCc3DrGUe2sti527BitkQ0Zr9MO9fvE"
    with xks_server.client(xks_server.admin_token) as admin:
        for bad in (
            {"access_key_id": "AKIAI0SFODNN7EXAMPLE", "secret_access_key": secret},  # 0 is not base32
            {"access_key_id": "AKIAI2SFODNN7EXAMPL", "secret_access_key": secret},  # 19 characters
            {"access_key_id": "AKIAI2SFODNN7EXAMPLE", "secret_access_key": secret[:42]},
            {"access_key_id": "AKIAI2SFODNN7EXAMPLE", "secret_access_key": secret[:-1] + "-"},
        ):
            refused = admin.post(f"/v1/principals/{store_a.name}/access-keys", json=bad)
            assert refused.status_code == 400, bad
            assert secret[:20] not in refused.text
        given = {"access_key_id": "AKIAI2SFODNN7EXAMPLE", "secret_access_key": secret}
        assert admin.post(f"/v1/principals/{store_a.name}/access-keys", json=given).status_code == 201


def test_two_credentials_at_once_rotate_without_a_restart(botocore_signer: Signer, xks_server: Server) -> None:
    old = new_store(xks_server, "store-rotating", "keystores/rotating")
    with xks_server.client(xks_server.admin_token) as admin:
        made = admin.post("/v1/principals/store-rotating/access-keys", json={}).json()
    new = KeyStore(old.name, old.prefix, made["access_key_id"], made["secret_access_key"])
    assert botocore_signer(old, health_path(old), HEALTH).status == 200
    assert botocore_signer(new, health_path(new), HEALTH).status == 200
    with xks_server.client(xks_server.admin_token) as admin:
        assert admin.delete(f"/v1/principals/store-rotating/access-keys/{old.access_key_id}").status_code == 204
    assert botocore_signer(old, health_path(old), HEALTH).error == "AuthenticationFailedException"
    assert botocore_signer(new, health_path(new), HEALTH).status == 200


def test_a_store_without_a_region_takes_any(botocore_signer: Signer, xks_server: Server) -> None:
    anywhere = new_store(xks_server, "store-anywhere", "keystores/anywhere", region=None)
    for region in ("us-east-1", "ap-southeast-2"):
        assert botocore_signer(anywhere, health_path(anywhere), HEALTH, region=region).status == 200


def test_a_key_store_uses_nothing_else(xks_server: Server, store_a: KeyStore) -> None:
    new_key(xks_server, "xks-not-rest", {"encrypt": [store_a.name], "decrypt": [store_a.name]})
    with xks_server.client(xks_server.admin_token) as admin:
        token = admin.post(
            "/v1/principals", json={"name": "store-token", "role": "xks", "xks_uri_prefix": "keystores/token"}
        ).json()["token"]
    with xks_server.client(token) as store:
        refused = store.post("/v1/keys/xks-not-rest/encrypt", json={"plaintext": "eA=="})
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthenticated")
        assert store.get("/v1/keys").status_code == 401
    kms = boto3.client(
        "kms",
        endpoint_url=xks_server.url,
        region_name=REGION,
        aws_access_key_id=store_a.access_key_id,
        aws_secret_access_key=store_a.secret_access_key,
        verify=str(xks_server.ca),
        config=Config(retries={"max_attempts": 1}),
    )
    for call in (lambda: kms.encrypt(KeyId="alias/xks-not-rest", Plaintext=b"x"), kms.list_keys):
        with pytest.raises(ClientError) as refused_kms:
            call()
        assert refused_kms.value.response["Error"]["Code"] == "UnrecognizedClientException"


def test_kms_principals_cannot_use_the_xks_door(botocore_signer: Signer, xks_server: Server) -> None:
    with xks_server.client(xks_server.admin_token) as admin:
        assert admin.post("/v1/principals", json={"name": "plain-app", "role": "app"}).status_code == 201
        pair = admin.post("/v1/principals/plain-app/access-keys", json={}).json()
    impostor = KeyStore("plain-app", "keystores/store-a", pair["access_key_id"], pair["secret_access_key"])
    answer = botocore_signer(impostor, health_path(impostor), HEALTH)
    assert (answer.status, answer.error) == (401, "AuthenticationFailedException")
