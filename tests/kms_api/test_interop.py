"""One key model: keys made through REST work through the KMS API, and the reverse."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.e2e.conftest import Server


@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM"])
def test_a_rest_key_through_kms(kms_server: Server, admin_kms: Any, algorithm: str) -> None:
    name = f"rest-made-{algorithm.lower().replace('_', '-')}"
    policy = {op: ["kms-admin"] for op in ("encrypt", "decrypt", "generate_data_key")}
    with kms_server.client(kms_server.admin_token) as admin:
        made = admin.post("/v1/keys", json={"name": name, "algorithm": algorithm, "policy": policy})
        assert made.status_code == 201, made.text
    key_id = made.json()["id"]
    described = admin_kms.describe_key(KeyId=f"alias/{name}")["KeyMetadata"]
    assert described["KeyId"] == key_id and described["KeySpec"] == "SYMMETRIC_DEFAULT"
    blob = admin_kms.encrypt(KeyId=f"alias/{name}", Plaintext=b"rest key", EncryptionContext={"k": "v"})[
        "CiphertextBlob"
    ]
    assert blob[3] == {"AES_256_CBC_HMAC_SHA256": 1, "AES_256_GCM": 2}[algorithm]
    assert admin_kms.decrypt(CiphertextBlob=blob, EncryptionContext={"k": "v"})["Plaintext"] == b"rest key"
    assert any(a["AliasName"] == f"alias/{name}" for a in admin_kms.list_aliases(Limit=1000)["Aliases"])


def test_a_kms_key_through_rest(kms_server: Server, admin_kms: Any) -> None:
    key = admin_kms.create_key(Description="kms made")["KeyMetadata"]
    admin_kms.create_alias(AliasName="alias/kms-made", TargetKeyId=key["KeyId"])
    with kms_server.client(kms_server.admin_token) as admin:
        bootstrap = next(
            p["name"] for p in admin.get("/v1/principals").json() if p["role"] == "admin" and p["name"] != "kms-admin"
        )
        read = admin.get(f"/v1/keys/{key['KeyId']}").json()
        assert read["name"] == "kms-made" and read["algorithm"] == "AES_256_GCM" and read["description"] == "kms made"
        # the creator holds every encrypting right; add the REST caller too
        assert sorted(read["policy"]["encrypt"]) == ["kms-admin"]
        policy = {op: ["kms-admin", bootstrap] for op in ("encrypt", "decrypt", "generate_data_key", "reencrypt")}
        assert admin.patch("/v1/keys/kms-made", json={"policy": policy}).status_code == 200
        sealed = admin.post("/v1/keys/kms-made/encrypt", json={"plaintext": base64.b64encode(b"rest side").decode()})
        assert sealed.status_code == 200
        text = sealed.json()["ciphertext"]
    _, _, key_id, version, body = text.split(":")
    blob = b"km\x01\x02" + bytes.fromhex(key_id) + int(version).to_bytes(4, "big") + base64.b64decode(body)
    assert admin_kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b"rest side"
    made = admin_kms.encrypt(KeyId="alias/kms-made", Plaintext=b"kms side")["CiphertextBlob"]
    text = f"km:1:{made[4:20].hex()}:{int.from_bytes(made[20:24], 'big')}:" + base64.b64encode(made[24:]).decode()
    with kms_server.client(kms_server.admin_token) as admin:
        opened = admin.post("/v1/decrypt", json={"ciphertext": text})
    assert opened.status_code == 200 and base64.b64decode(opened.json()["plaintext"]) == b"kms side"


def test_kms_calls_are_audited_like_their_native_twins(kms_server: Server, admin_kms: Any) -> None:
    key = admin_kms.create_key()["KeyMetadata"]
    admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a")
    admin_kms.disable_key(KeyId=key["KeyId"])
    with kms_server.client(kms_server.admin_token) as admin:
        records = admin.get("/v1/audit", params={"key": key["KeyId"], "limit": 100}).json()
        assert admin.get("/v1/audit/verify").json()["ok"] is True
    records = records["records"] if isinstance(records, dict) else records
    seen = [(r["action"], r["principal"], r["key_version"]) for r in records]
    assert ("kms.CreateKey", "kms-admin", 1) in seen
    assert ("kms.Encrypt", "kms-admin", 1) in seen
    assert any(action == "kms.DisableKey" for action, _, _ in seen)


def test_a_refused_call_is_audited_under_the_key_it_named(kms_server: Server, admin_kms: Any, app_kms: Any) -> None:
    key = admin_kms.create_key()["KeyMetadata"]
    try:
        app_kms.encrypt(KeyId=key["Arn"], Plaintext=b"a")
    except app_kms.exceptions.ClientError as refused:
        assert refused.response["Error"]["Code"] == "AccessDeniedException"
    else:
        raise AssertionError("kms-app may not encrypt with this key")
    with kms_server.client(kms_server.admin_token) as admin:
        records = admin.get("/v1/audit", params={"key": key["KeyId"], "limit": 100}).json()
    records = records["records"] if isinstance(records, dict) else records
    refused_records = [r for r in records if r["action"] == "kms.Encrypt"]
    assert len(refused_records) == 1
    record = refused_records[0]
    assert (record["principal"], record["status"], record["outcome"]) == ("kms-app", 400, "denied")
    assert record["details"]["error"] == "AccessDeniedException"
