"""A key version whose HSM object vanished answers 503 on every operation; a ciphertext naming a
version the database does not have still answers like every other bad ciphertext."""

from __future__ import annotations

from fastapi.testclient import TestClient

from keymanager.domain import ciphertext as ct
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from tests.api.support import assert_error, b64
from tests.conftest import auth

CARD = b"4111111111111111"


def test_a_vanished_key_object_is_503_for_encryption_and_decryption_alike(
    client: TestClient, services: Services, hsm: Hsm, admin_token: str
) -> None:
    admin = auth(admin_token)
    policy = {"encrypt": ["admin"], "decrypt": ["admin"], "generate_data_key": ["admin"]}
    assert client.post("/v1/keys", json={"name": "cards", "policy": policy}, headers=admin).status_code == 201
    made = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=admin)
    text = made.json()["ciphertext"]
    parsed = ct.parse(text)
    unknown_version = ct.Ciphertext(parsed.key_id, 2, parsed.body).encode()
    hsm.destroy_version(services.keys.find("cards").versions[1].hsm)  # behind the database's back

    missing = "a key object is missing from the HSM"
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=admin)
    assert_error(response, 503, "hsm_unavailable", missing)
    response = client.post("/v1/decrypt", json={"ciphertext": text}, headers=admin)
    assert_error(response, 503, "hsm_unavailable", missing)
    response = client.post("/v1/keys/cards/decrypt", json={"ciphertext": text}, headers=admin)
    assert_error(response, 503, "hsm_unavailable", missing)
    response = client.post("/v1/keys/cards/datakey", json={}, headers=admin)
    assert_error(response, 503, "hsm_unavailable", missing)

    # A version the database does not have never reaches the HSM: the same 400 as any bad ciphertext.
    response = client.post("/v1/decrypt", json={"ciphertext": unknown_version}, headers=admin)
    assert_error(response, 400, "decryption_failed")
