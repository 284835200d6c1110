"""The Transit door in process (the app over the real SoftHSM and SQLite): bad input answered with Vault's
400 naming the field, audited, nothing changed; bounds; refusals before authentication throttled and
summarised; mounts; the audit records of every answer."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from keymanager.api.app import ROUTERS, create_app
from keymanager.config import REST_PATHS, Settings
from keymanager.domain.models import Role
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from tests.conftest import auth, make_settings


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def door(tmp_path: Path, hsm: Hsm) -> Iterator[tuple[TestClient, Services, str]]:
    settings = make_settings(
        tmp_path / "var",
        transit_mount="transit,seal/unseal",
        max_batch_items=3,
        auth_failure_burst=3,
        auth_failures_per_second=0.001,  # a spent burst stays spent for the test, however slow the machine
    )
    services = Services.build(settings, hsm=hsm)
    admin = services.principals.create("admin", Role.ADMIN).token
    with TestClient(create_app(services=services), base_url="https://testserver") as client:
        yield client, services, admin
    services.close()


def vault(token: str) -> dict[str, str]:
    return {"X-Vault-Token": token}


def made(client: TestClient, admin: str, name: str = "k", **body: Any) -> None:
    answer = client.post(f"/v1/transit/keys/{name}", headers=vault(admin), json=body)
    assert answer.status_code == 200, answer.text


def audit(client: TestClient, admin: str) -> list[dict[str, Any]]:
    return list(client.get("/v1/audit", headers=auth(admin), params={"limit": 500}).json()["records"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"plaintext": b64(b"x"), "colour": "red"}, "colour: unknown field"),
        ({"plaintext": "!!"}, "plaintext: not valid base64"),
        ({"plaintext": 7}, "plaintext: expected a string"),
        ({"plaintext": b64(b"x"), "key_version": "two"}, "key_version: expected an integer"),
        ({"plaintext": b64(b"x"), "associated_data": "%"}, "associated_data: not valid base64"),
        ({"batch_input": [{"plaintext": b64(b"x")}] * 4}, "batch_input: at most 3 items"),
        ({"batch_input": "x"}, "batch_input: expected a list of objects"),
        ({"batch_input": []}, "missing batch input"),
        ({}, "missing plaintext"),
    ],
)
def test_bad_input_is_vaults_400_naming_the_field_and_audited(
    door: tuple[TestClient, Services, str], body: dict[str, Any], message: str
) -> None:
    client, _, admin = door
    made(client, admin)
    answer = client.post("/v1/transit/encrypt/k", headers=vault(admin), json=body)
    assert (answer.status_code, answer.json()) == (400, {"errors": [message]}) or message in answer.json()["errors"][0]
    assert answer.status_code == 400
    last = [r for r in audit(client, admin) if r["action"] == "transit.encrypt"][-1]
    assert (last["action"], last["status"], last["principal"]) == ("transit.encrypt", 400, "admin")
    assert message.split(":")[0] in last["details"]["error"]


def test_duplicate_keys_deep_nesting_and_large_bodies_are_refused_before_any_work(
    door: tuple[TestClient, Services, str],
) -> None:
    client, _, admin = door
    made(client, admin)
    twice = client.post(
        "/v1/transit/encrypt/k",
        headers={**vault(admin), "content-type": "application/json"},
        content=b'{"plaintext": "eA==", "plaintext": "eQ=="}',
    )
    assert twice.status_code == 400 and "names the key 'plaintext' twice" in twice.json()["errors"][0]
    deep = client.post("/v1/transit/encrypt/k", headers=vault(admin), content=b'{"a":' * 40 + b"1" + b"}" * 40)
    assert deep.status_code == 400 and "nested deeper" in deep.json()["errors"][0]
    huge = client.post(
        "/v1/transit/keys/k/config", headers=vault(admin), content=b"{" + b" " * (2 * 1024 * 1024) + b"}"
    )
    assert huge.status_code == 413


def test_ciphertexts_of_another_key_other_versions_and_minimums(door: tuple[TestClient, Services, str]) -> None:
    client, _, admin = door
    made(client, admin, "a")
    made(client, admin, "b")
    sealed = client.post("/v1/transit/encrypt/a", headers=vault(admin), json={"plaintext": b64(b"x")}).json()
    text = sealed["data"]["ciphertext"]
    other = client.post("/v1/transit/decrypt/b", headers=vault(admin), json={"ciphertext": text})
    garbled = client.post("/v1/transit/decrypt/a", headers=vault(admin), json={"ciphertext": text[:-2] + "AA"})
    bad_base64 = client.post("/v1/transit/decrypt/a", headers=vault(admin), json={"ciphertext": "vault:v1:%%%"})
    assert other.json() == garbled.json() == bad_base64.json() == {"errors": ["invalid ciphertext: decryption failed"]}
    zero = client.post("/v1/transit/decrypt/a", headers=vault(admin), json={"ciphertext": "vault:v0:AAAA"})
    assert zero.status_code == 400 and "version 0" in zero.json()["errors"][0]
    assert client.post("/v1/transit/keys/a/rotate", headers=vault(admin)).json()["data"]["latest_version"] == 2
    raised = client.post("/v1/transit/keys/a/config", headers=vault(admin), json={"min_decryption_version": 2})
    assert raised.json()["data"]["min_decryption_version"] == 2
    old = client.post("/v1/transit/decrypt/a", headers=vault(admin), json={"ciphertext": text})
    assert old.json() == {"errors": ["ciphertext: ciphertext or signature version is disallowed by policy (too old)"]}
    beyond = client.post("/v1/transit/keys/a/config", headers=vault(admin), json={"min_decryption_version": 3})
    assert beyond.status_code == 400 and "min_decryption_version" in beyond.json()["errors"][0]
    assert client.get("/v1/keys/a", headers=auth(admin)).json()["min_decryption_version"] == 2  # nothing changed


def test_batch_status_is_vaults(door: tuple[TestClient, Services, str]) -> None:
    client, _, admin = door
    made(client, admin)
    items = [{"plaintext": b64(b"x")}, {"plaintext": "!"}]
    mixed = client.post("/v1/transit/encrypt/k", headers=vault(admin), json={"batch_input": items})
    assert mixed.status_code == 400
    assert [("error" in r) for r in mixed.json()["data"]["batch_results"]] == [False, True]
    partial = client.post(
        "/v1/transit/encrypt/k", headers=vault(admin), json={"batch_input": items, "partial_failure_response_code": 207}
    )
    assert partial.status_code == 207
    failed = client.post(
        "/v1/transit/encrypt/k",
        headers=vault(admin),
        json={"batch_input": items[1:], "partial_failure_response_code": 207},
    )
    assert failed.status_code == 400  # all failed: 400 whatever the caller asked


def test_refusals_before_authentication_are_throttled_and_summarised(door: tuple[TestClient, Services, str]) -> None:
    client, _, admin = door
    statuses = [client.post("/v1/transit/encrypt/k", headers=vault("kmt_guess"), json={}).status_code for _ in range(5)]
    assert statuses[:3] == [403, 403, 403] and statuses[3:] == [429, 429]
    throttled = client.post("/v1/transit/encrypt/k", headers=vault("kmt_guess"), json={})
    assert throttled.headers["retry-after"] and throttled.json()["errors"] == [
        "too many failed authentications from this address"
    ]
    logins = client.post("/v1/auth/approle/login", json={"role_id": "r", "secret_id": "s"})
    assert logins.status_code == 429
    made(client, admin)  # a stored credential is served from the throttled address
    records = audit(client, admin)
    failed = [r for r in records if r["action"] == "auth.failed"]
    assert len(failed) == 1 and failed[0]["details"]["path"] == "/v1/transit/encrypt/k"
    assert not any(r["action"] == "transit.encrypt" for r in records)  # never one record per stranger


def test_approle_credentials_through_rest_and_login(door: tuple[TestClient, Services, str]) -> None:
    client, _, admin = door
    app = client.post("/v1/principals", headers=auth(admin), json={"name": "billing", "role": "app"})
    assert app.status_code == 201
    first = client.post("/v1/principals/billing/approle", headers=auth(admin)).json()
    client.post("/v1/principals/billing/approle", headers=auth(admin))
    third = client.post("/v1/principals/billing/approle", headers=auth(admin))
    assert third.status_code == 409
    listed = client.get("/v1/principals/billing/approle", headers=auth(admin)).json()
    assert listed[0]["role_id"] == first["role_id"] and "secret_id" not in listed[0]
    token = client.post("/v1/auth/approle/login", json={"role_id": first["role_id"], "secret_id": first["secret_id"]})
    assert token.status_code == 200
    auth_block = token.json()["auth"]
    assert auth_block["client_token"].startswith("hvs.") and auth_block["lease_duration"] == 86400
    looked = client.get("/v1/auth/token/lookup-self", headers=vault(auth_block["client_token"])).json()["data"]
    assert looked["display_name"] == "billing" and looked["path"] == "auth/approle/login"
    assert client.get("/v1/whoami", headers=auth(auth_block["client_token"])).json()["name"] == "billing"
    extra = client.post(
        "/v1/auth/approle/login", json={"role_id": first["role_id"], "secret_id": first["secret_id"], "x": 1}
    )
    assert extra.status_code == 400 and extra.json()["errors"] == ["x: unknown field"]
    app_token = app.json()["token"]
    assert client.post("/v1/principals/billing/approle", headers=auth(app_token)).status_code == 403
    records = [r for r in audit(client, admin) if r["action"] == "transit.login"]
    assert records[-1]["principal"] == "billing" and auth_block["client_token"] not in str(records)
    assert first["secret_id"] not in str(audit(client, admin))


def test_key_types_map_to_the_table_and_unserved_keys_stay_out(door: tuple[TestClient, Services, str]) -> None:
    client, _, admin = door
    made(client, admin, "small", type="aes128-gcm96")
    made(client, admin, "mac", type="hmac", key_size=64)
    assert client.get("/v1/keys/small", headers=auth(admin)).json()["algorithm"] == "AES_128_GCM"
    assert client.get("/v1/keys/mac", headers=auth(admin)).json()["algorithm"] == "HMAC_SHA512"
    client.post("/v1/keys", headers=auth(admin), json={"name": "cbc", "policy": {}})
    listed = client.get("/v1/transit/keys", headers=vault(admin), params={"list": "true"}).json()["data"]["keys"]
    assert listed == ["mac", "small"]
    unserved = client.get("/v1/transit/keys/cbc", headers=vault(admin))
    assert unserved.status_code == 400 and "AES_256_CBC_HMAC_SHA256" in unserved.json()["errors"][0]
    unknown = client.post("/v1/transit/keys/x", headers=vault(admin), json={"type": "des"})
    assert unknown.status_code == 400 and "unknown key type des" in unknown.json()["errors"][0]
    missing = client.get("/v1/transit/keys/nothing", headers=vault(admin))
    assert (missing.status_code, missing.json()) == (404, {"errors": []})


def test_every_mount_serves_the_same_keys_and_paths_are_vaults(door: tuple[TestClient, Services, str]) -> None:
    client, _, admin = door
    made(client, admin)
    sealed = client.post("/v1/seal/unseal/encrypt/k", headers=vault(admin), json={"plaintext": b64(b"x")})
    opened = client.put(
        "/v1/transit/decrypt/k", headers=vault(admin), json={"ciphertext": sealed.json()["data"]["ciphertext"]}
    )  # the Go client's PUT
    assert opened.json()["data"]["plaintext"] == b64(b"x")
    assert client.post("/v1/transit/nothing/k", headers=vault(admin)).json() == {"errors": ["unsupported path"]}
    odd = client.post("/v1/transit/encrypt/" + "x" * 200, headers=vault(admin), json={"plaintext": "eA=="})
    assert odd.status_code == 400 and odd.json()["errors"][0].startswith("name: a key is named by its name")
    wrong = client.delete("/v1/transit/encrypt/k", headers=vault(admin))
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST, PUT"
    assert client.get("/v1/keys", headers=auth(admin)).status_code == 200  # REST is untouched


def test_mounts_that_would_shadow_rest_are_refused_and_the_list_is_rests() -> None:
    for mount in ("keys", "principals/x", "auth", "Keys", "transit,transit", "a,a/b", "with space"):
        with pytest.raises(ValidationError):
            Settings(transit_mount=mount)
    rest = {route.path.split("/")[2] for router in ROUTERS for route in router.routes if route.path.startswith("/v1/")}
    assert rest <= REST_PATHS


MANAGE = {
    "key_create": ("POST", "/v1/transit/keys/new", {}),
    "key_config": ("POST", "/v1/transit/keys/k/config", {"deletion_allowed": True}),
    "key_rotate": ("POST", "/v1/transit/keys/k/rotate", {}),
    "key_delete": ("DELETE", "/v1/transit/keys/k", None),
}
USE = {
    "key_read": ("GET", "/v1/transit/keys/k", None),
    "encrypt": ("POST", "/v1/transit/encrypt/k", {"plaintext": "eA=="}),
    "datakey": ("POST", "/v1/transit/datakey/wrapped/k", {}),
}


@pytest.mark.parametrize("role", ["app", "auditor"])
@pytest.mark.parametrize("operation", sorted({**MANAGE, **USE}))
def test_authorization_matrix(door: tuple[TestClient, Services, str], role: str, operation: str) -> None:
    """Key management is an admin's; a use of a key is its policy's (an auditor never uses a key)."""
    client, services, admin = door
    made(client, admin)
    caller_name = f"{role}-caller"
    caller = services.principals.create(caller_name, Role(role)).token
    method, path, body = {**MANAGE, **USE}[operation]
    refused = client.request(method, path, headers=vault(caller), json=body)
    assert (refused.status_code, refused.json()) == (403, {"errors": ["permission denied"]})
    if role == "app" and operation in USE:  # named in the policy, the app is served
        policy = client.get("/v1/keys/k", headers=auth(admin)).json()["policy"]
        policy.update(encrypt=["admin", "app-caller"], generate_data_key=["admin", "app-caller"])
        client.patch("/v1/keys/k", headers=auth(admin), json={"policy": policy})
        assert client.request(method, path, headers=vault(caller), json=body).status_code == 200
    mine = [r for r in audit(client, admin) if r["action"] == f"transit.{operation}" and r["principal"] == caller_name]
    assert (mine[0]["status"], mine[0]["outcome"]) == (403, "denied")
