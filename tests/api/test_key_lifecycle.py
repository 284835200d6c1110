"""Rotation, min_decryption_version, re-encryption, data keys, batches, MACs and deletion through the API."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.services.container import Services
from tests.api.support import assert_error, b64, unb64
from tests.conftest import auth

CARD = b"4111111111111111"
ALL_USES = ["encrypt", "decrypt", "generate_data_key", "reencrypt", "mac"]


@pytest.fixture
def app_token(client: TestClient, admin_token: str) -> str:
    made = client.post("/v1/principals", json={"name": "billing", "role": "app"}, headers=auth(admin_token))
    return str(made.json()["token"])


def make_key(client: TestClient, admin_token: str, name: str, algorithm: str = "AES_256_CBC_HMAC_SHA256") -> Any:
    policy = {use: ["billing"] for use in ALL_USES}
    made = client.post(
        "/v1/keys", json={"name": name, "algorithm": algorithm, "policy": policy}, headers=auth(admin_token)
    )
    assert made.status_code == 201, made.text
    return made.json()


def encrypt(client: TestClient, token: str, key: str, data: bytes = CARD, **extra: Any) -> str:
    made = client.post(f"/v1/keys/{key}/encrypt", json={"plaintext": b64(data), **extra}, headers=auth(token))
    assert made.status_code == 200, made.text
    return str(made.json()["ciphertext"])


def decrypt(client: TestClient, token: str, ciphertext: str, **extra: Any) -> Any:
    return client.post("/v1/decrypt", json={"ciphertext": ciphertext, **extra}, headers=auth(token))


@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM"])
def test_rotation_min_decryption_version_and_reencrypt(
    client: TestClient, admin_token: str, app_token: str, algorithm: str
) -> None:
    make_key(client, admin_token, "cards", algorithm)
    v1 = encrypt(client, app_token, "cards")
    rotated = client.post("/v1/keys/cards/rotate", headers=auth(admin_token))
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["primary_version"] == 2
    assert [v["version"] for v in rotated.json()["versions"]] == [1, 2]
    assert ":2:" in encrypt(client, app_token, "cards")
    assert unb64(decrypt(client, app_token, v1).json()["plaintext"]) == CARD

    too_high = client.patch("/v1/keys/cards", json={"min_decryption_version": 3}, headers=auth(admin_token))
    assert_error(too_high, 400, "invalid_request")
    raised = client.patch("/v1/keys/cards", json={"min_decryption_version": 2}, headers=auth(admin_token))
    assert raised.json()["min_decryption_version"] == 2
    assert_error(decrypt(client, app_token, v1), 409, "version_below_minimum")
    with_key = client.post("/v1/keys/cards/decrypt", json={"ciphertext": v1}, headers=auth(app_token))
    assert_error(with_key, 409, "version_below_minimum")

    client.patch("/v1/keys/cards", json={"min_decryption_version": 1}, headers=auth(admin_token))
    rewrapped = client.post("/v1/keys/cards/reencrypt", json={"ciphertext": v1}, headers=auth(app_token))
    assert rewrapped.status_code == 200, rewrapped.text
    assert rewrapped.json()["key_version"] == 2
    assert "plaintext" not in rewrapped.json()
    client.patch("/v1/keys/cards", json={"min_decryption_version": 2}, headers=auth(admin_token))
    assert unb64(decrypt(client, app_token, rewrapped.json()["ciphertext"]).json()["plaintext"]) == CARD


def test_reencrypt_to_another_key_needs_encrypt_there(client: TestClient, admin_token: str, app_token: str) -> None:
    make_key(client, admin_token, "old")
    make_key(client, admin_token, "new", "AES_256_GCM")
    client.post("/v1/keys", json={"name": "closed", "policy": {}}, headers=auth(admin_token))
    ciphertext = encrypt(client, app_token, "old", context={"t": "1"})
    body = {"ciphertext": ciphertext, "context": {"t": "1"}, "destination_key": "new"}
    moved = client.post("/v1/keys/old/reencrypt", json=body, headers=auth(app_token))
    assert moved.status_code == 200, moved.text
    assert unb64(decrypt(client, app_token, moved.json()["ciphertext"], context={"t": "1"}).json()["plaintext"]) == CARD
    refused = client.post("/v1/keys/old/reencrypt", json={**body, "destination_key": "closed"}, headers=auth(app_token))
    assert_error(refused, 403, "forbidden")
    wrong_context = client.post("/v1/keys/old/reencrypt", json={"ciphertext": ciphertext}, headers=auth(app_token))
    assert_error(wrong_context, 400, "decryption_failed")


@pytest.mark.parametrize("bits", [128, 256])
def test_data_key_ciphertext_decrypts_to_the_data_key(
    client: TestClient, admin_token: str, app_token: str, bits: int
) -> None:
    make_key(client, admin_token, "wrapping")
    context = {"file": "report.pdf"}
    made = client.post(
        "/v1/keys/wrapping/datakey", json={"bits": bits, "context": context}, headers=auth(app_token)
    ).json()
    data_key = unb64(made["plaintext"])
    assert len(data_key) == bits // 8
    assert unb64(decrypt(client, app_token, made["ciphertext"], context=context).json()["plaintext"]) == data_key
    assert_error(decrypt(client, app_token, made["ciphertext"]), 400, "decryption_failed")
    hidden = client.post("/v1/keys/wrapping/datakey", json={"include_plaintext": False}, headers=auth(app_token))
    assert "plaintext" not in hidden.json() and hidden.json()["ciphertext"].startswith("km:1:")
    assert_error(
        client.post("/v1/keys/wrapping/datakey", json={"bits": 512}, headers=auth(app_token)), 422, "invalid_request"
    )


def test_batches_return_one_result_per_item_in_order(client: TestClient, admin_token: str, app_token: str) -> None:
    make_key(client, admin_token, "cards")
    items = [{"plaintext": b64(b"a" * n)} for n in range(5)]
    items.insert(2, {"plaintext": "not base64!"})
    items.append({"plaintext": b64(b"x" * 70_000)})
    encrypted = client.post("/v1/keys/cards/encrypt/batch", json={"items": items}, headers=auth(app_token))
    assert encrypted.status_code == 200, encrypted.text
    results = encrypted.json()["results"]
    assert len(results) == 7
    assert results[2]["error"]["code"] == "invalid_request"
    assert results[6]["error"]["code"] == "payload_too_large"
    good = [r["ciphertext"] for r in results if "ciphertext" in r]
    assert len(good) == 5

    to_decrypt = [{"ciphertext": c} for c in good]
    to_decrypt.insert(1, {"ciphertext": good[0][:-6] + "AAAAAA"})
    to_decrypt.append({"ciphertext": "garbage"})
    decrypted = client.post("/v1/keys/cards/decrypt/batch", json={"items": to_decrypt}, headers=auth(app_token))
    out = decrypted.json()["results"]
    assert out[1] == {"error": {"code": "decryption_failed", "message": "decryption failed"}}
    assert out[-1] == out[1]
    plain = [unb64(r["plaintext"]) for r in out if "plaintext" in r]
    assert plain == [b"a" * n for n in range(5)]


def test_a_batch_over_the_item_limit_is_refused(client: TestClient, admin_token: str, app_token: str) -> None:
    make_key(client, admin_token, "cards")
    items = [{"plaintext": b64(b"1")}] * 1001
    too_many = client.post("/v1/keys/cards/encrypt/batch", json={"items": items}, headers=auth(app_token))
    assert_error(too_many, 413, "payload_too_large")


def test_hmac_keys_compute_deterministic_macs(client: TestClient, admin_token: str, app_token: str) -> None:
    make_key(client, admin_token, "card-index", "HMAC_SHA256")
    first = client.post("/v1/keys/card-index/mac", json={"data": b64(CARD)}, headers=auth(app_token)).json()
    again = client.post("/v1/keys/card-index/mac", json={"data": b64(CARD)}, headers=auth(app_token)).json()
    other = client.post("/v1/keys/card-index/mac", json={"data": b64(b"4111111111111112")}, headers=auth(app_token))
    assert first["mac"] == again["mac"] != other.json()["mac"]
    assert len(unb64(first["mac"])) == 32
    verify = {"data": b64(CARD), "mac": first["mac"]}
    assert client.post("/v1/keys/card-index/mac/verify", json=verify, headers=auth(app_token)).json() == {"valid": True}
    forged = {"data": b64(b"4111111111111112"), "mac": first["mac"]}
    assert client.post("/v1/keys/card-index/mac/verify", json=forged, headers=auth(app_token)).json() == {
        "valid": False
    }
    in_context = client.post(
        "/v1/keys/card-index/mac", json={"data": b64(CARD), "context": {"t": "1"}}, headers=auth(app_token)
    )
    assert in_context.json()["mac"] != first["mac"]
    as_cipher = client.post("/v1/keys/card-index/encrypt", json={"plaintext": b64(CARD)}, headers=auth(app_token))
    assert_error(as_cipher, 400, "invalid_request")
    make_key(client, admin_token, "cards")
    not_hmac = client.post("/v1/keys/cards/mac", json={"data": b64(CARD)}, headers=auth(app_token))
    assert_error(not_hmac, 400, "invalid_request")


def test_deletion_waits_can_be_cancelled_and_then_destroys(
    client: TestClient, services: Services, admin_token: str, app_token: str
) -> None:
    key = make_key(client, admin_token, "cards")
    ciphertext = encrypt(client, app_token, "cards")
    assert_error(client.delete("/v1/keys/cards?pending_days=6", headers=auth(admin_token)), 400, "invalid_request")
    pending = client.delete("/v1/keys/cards", headers=auth(admin_token))
    assert pending.status_code == 200, pending.text
    assert pending.json()["state"] == "pending_deletion" and pending.json()["deletion_date"]
    assert_error(decrypt(client, app_token, ciphertext), 409, "key_pending_deletion")
    cancelled = client.post("/v1/keys/cards/cancel-deletion", headers=auth(admin_token))
    assert cancelled.json()["state"] == "disabled" and cancelled.json()["deletion_date"] is None
    assert_error(decrypt(client, app_token, ciphertext), 409, "key_disabled")
    again = client.post("/v1/keys/cards/cancel-deletion", headers=auth(admin_token))
    assert_error(again, 409, "conflict")

    assert client.delete("/v1/keys/cards?pending_days=7", headers=auth(admin_token)).status_code == 200
    assert services.lifecycle.sweep() == []  # the date has not come
    labels = services.hsm.find_labels(f"km/{key['id']}/")
    assert len(labels) == 2
    from datetime import UTC, datetime, timedelta

    assert services.lifecycle.sweep(datetime.now(UTC) + timedelta(days=8)) == [key["id"]]
    assert services.hsm.find_labels(f"km/{key['id']}/") == []
    listed = {k["name"]: k["state"] for k in client.get("/v1/keys", headers=auth(admin_token)).json()}
    assert listed["cards"] == "destroyed"
    assert_error(decrypt(client, app_token, ciphertext), 409, "key_destroyed")
    assert_error(client.post("/v1/keys/cards/cancel-deletion", headers=auth(admin_token)), 409, "conflict")
    actions = [r["action"] for r in client.get("/v1/audit", headers=auth(admin_token)).json()["records"]]
    assert actions.count("key.destroy") == 1


def test_only_admins_rotate_or_delete(client: TestClient, admin_token: str, app_token: str) -> None:
    make_key(client, admin_token, "cards")
    assert_error(client.post("/v1/keys/cards/rotate", headers=auth(app_token)), 403, "forbidden")
    assert_error(client.delete("/v1/keys/cards", headers=auth(app_token)), 403, "forbidden")
    assert_error(client.post("/v1/keys/nope/rotate", headers=auth(admin_token)), 404, "key_not_found")
