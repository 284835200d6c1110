"""Asymmetric operations are audited: one record each, naming the key and algorithm, never the
message, signature, plaintext, shared secret or private key."""

from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fastapi.testclient import TestClient

from keymanager.domain.audit import AuditQuery
from keymanager.services.container import Services
from tests.conftest import auth

RIGHTS = ("sign", "verify", "get_public_key", "derive_shared_secret", "generate_data_key_pair", "encrypt", "decrypt")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_each_operation_writes_one_record_without_secrets(
    client: TestClient, services: Services, admin_token: str
) -> None:
    admin = auth(admin_token)
    made = client.post("/v1/principals", json={"name": "signer", "role": "app"}, headers=admin)
    app = auth(made.json()["token"])
    policy = {right: ["signer"] for right in RIGHTS}
    for name, algorithm, usage in (("sig", "ECC_NIST_P256", None), ("agree", "ECC_NIST_P256", "KEY_AGREEMENT")):
        body = {"name": name, "algorithm": algorithm, "policy": policy, **({"usage": usage} if usage else {})}
        assert client.post("/v1/keys", json=body, headers=admin).status_code == 201
    assert (
        client.post(
            "/v1/keys", json={"name": "wrap", "algorithm": "AES_256_GCM", "policy": policy}, headers=admin
        ).status_code
        == 201
    )
    message = b"the message no record may hold"
    signed = client.post("/v1/keys/sig/sign", json={"message": b64(message), "algorithm": "ECDSA_SHA_256"}, headers=app)
    signature = signed.json()["signature"]
    verify = {"message": b64(message), "signature": signature, "algorithm": "ECDSA_SHA_256"}
    assert client.post("/v1/keys/sig/verify", json=verify, headers=app).json()["valid"] is True
    assert client.get("/v1/keys/sig/public-key", headers=app).status_code == 200
    peer = ec.generate_private_key(ec.SECP256R1()).public_key()
    spki = peer.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    derived = client.post("/v1/keys/agree/derive-shared-secret", json={"public_key": b64(spki)}, headers=app)
    pair = client.post("/v1/keys/wrap/datakey-pair", json={"key_pair_spec": "ECC_NIST_P256"}, headers=app)
    assert derived.status_code == 200 and pair.status_code == 200

    found = [r.fields() for r in services.audit_records.query(AuditQuery(limit=1000))]
    used = [(r["action"], r["principal"], r["status"], r["details"]) for r in found if r["principal"] == "signer"]
    assert [(a, p, s) for a, p, s, _ in used] == [
        ("key.sign", "signer", 200),
        ("key.verify", "signer", 200),
        ("key.public_key", "signer", 200),
        ("key.derive_shared_secret", "signer", 200),
        ("key.datakey_pair", "signer", 200),
    ]
    assert used[0][3] == {"key": "sig", "algorithm": "ECDSA_SHA_256", "message_type": "RAW"}
    assert used[1][3]["valid"] is True
    everything = json.dumps(found)
    secrets = (
        b64(message),
        signature,
        derived.json()["shared_secret"],
        pair.json()["private_key_plaintext"],
        pair.json()["private_key_ciphertext"],
    )
    for secret in secrets:
        assert secret not in everything
