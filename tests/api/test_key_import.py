"""Bring your own key over the API: the NIST FF1 samples through the service with the sample key imported.

The client side (wrapping the material under the service's RSA public key) uses ``cryptography``
here, as a client would; the service unwraps inside SoftHSM.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.hsm import Hsm
from keymanager.hsm.import_parameters import ImportParameters, WrappingAlgorithm
from tests.api.support import assert_error, b64
from tests.conftest import auth
from tests.domain.test_ff1 import KEY_256, TWEAK_2, TWEAK_3
from tests.hsm.test_key_import import wrap

DIGITS = {"alphabet": "digits", "keep_first": 0, "keep_last": 0, "luhn": "ignore"}
ALNUM = {"alphabet": "alphanumeric", "keep_first": 0, "keep_last": 0, "luhn": "ignore"}
POLICY = {"tokenize": ["billing"], "detokenize": ["billing"], "encrypt": ["billing"], "decrypt": ["billing"]}


@pytest.fixture
def billing(new_principal: Callable[..., str]) -> dict[str, str]:
    return auth(new_principal("billing"))


@pytest.fixture
def external_key(client: TestClient, admin: dict[str, str]) -> Callable[..., dict[str, Any]]:
    def make(name: str, algorithm: str = "FF1_AES_256", fmt: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "algorithm": algorithm, "origin": "external", "policy": POLICY}
        if fmt is not None:
            body["token_format"] = fmt
        response = client.post("/v1/keys", json=body, headers=admin)
        assert response.status_code == 201, response.text
        key: dict[str, Any] = response.json()
        return key

    return make


def import_material(
    client: TestClient,
    admin: dict[str, str],
    key: str,
    materials: list[bytes],
    wrapping: WrappingAlgorithm = WrappingAlgorithm.RSAES_OAEP_SHA_1,
    import_type: str | None = None,
) -> Any:
    got = client.post(f"/v1/keys/{key}/import-parameters", json={"wrapping_algorithm": wrapping.value}, headers=admin)
    assert got.status_code == 200, got.text
    body = got.json()
    params = ImportParameters(base64.b64decode(body["public_key"]), body["import_token"], 0)
    wrapped = [b64(wrap(params, wrapping, m)) for m in materials]
    request = {"import_token": params.import_token, "encrypted_key_material": wrapped[0]}
    if len(wrapped) > 1:
        request["encrypted_mac_key_material"] = wrapped[1]
    if import_type is not None:
        request["import_type"] = import_type
    return client.post(f"/v1/keys/{key}/import", json=request, headers=admin)


def _tokenize(client: TestClient, headers: dict[str, str], key: str, value: str, tweak: bytes = b"") -> Any:
    return client.post(f"/v1/keys/{key}/tokenize", json={"value": value, "tweak": b64(tweak)}, headers=headers)


@pytest.mark.parametrize("wrapping", list(WrappingAlgorithm))
def test_nist_samples_through_the_service_with_the_imported_key(
    client: TestClient,
    admin: dict[str, str],
    billing: dict[str, str],
    external_key: Callable[..., dict[str, Any]],
    hsm: Hsm,
    wrapping: WrappingAlgorithm,
) -> None:
    pending = external_key("nist10", fmt=DIGITS)
    if not hsm.capabilities().has(wrapping.feature):  # the token lacks it: not offered
        offered = client.post(
            "/v1/keys/nist10/import-parameters", json={"wrapping_algorithm": wrapping.value}, headers=admin
        )
        message = assert_error(offered, 400, "invalid_request")["error"]["message"]
        assert wrapping.value not in message and "RSAES_OAEP_SHA_1" in message
        return
    assert (pending["state"], pending["origin"], pending["versions"]) == ("pending_import", "external", [])
    assert_error(_tokenize(client, billing, "nist10", "0123456789"), 409, "key_pending_import")
    imported = import_material(client, admin, "nist10", [KEY_256], wrapping)
    assert imported.status_code == 200, imported.text
    assert (imported.json()["state"], imported.json()["primary_version"]) == ("enabled", 1)
    sample_7 = _tokenize(client, billing, "nist10", "0123456789")
    assert sample_7.status_code == 200, sample_7.text
    assert sample_7.json()["token"] == "6657667009"  # sample 7
    assert _tokenize(client, billing, "nist10", "0123456789", TWEAK_2).json()["token"] == "1001623463"  # sample 8
    external_key("nist36", fmt=ALNUM)
    assert import_material(client, admin, "nist36", [KEY_256], wrapping).status_code == 200
    token = _tokenize(client, billing, "nist36", "0123456789abcdefghi", TWEAK_3).json()["token"]
    assert token == "xs8a0azh2avyalyzuwd"  # sample 9
    back = client.post(
        "/v1/keys/nist36/detokenize", json={"token": token, "tweak": b64(TWEAK_3)}, headers=billing
    ).json()
    assert back == {"value": "0123456789abcdefghi"}


def test_new_material_adds_a_version_only_when_asked_for(
    client: TestClient, admin: dict[str, str], billing: dict[str, str], external_key: Callable[..., dict[str, Any]]
) -> None:
    external_key("nist10", fmt=DIGITS)
    import_material(client, admin, "nist10", [KEY_256])
    again = import_material(client, admin, "nist10", [KEY_256])
    assert again.status_code == 200 and again.json()["primary_version"] == 1  # the same material: nothing changes
    other = os.urandom(32)
    refused = assert_error(import_material(client, admin, "nist10", [other]), 400, "invalid_request")
    assert "NEW_KEY_MATERIAL" in refused["error"]["message"]
    assert_error(
        import_material(client, admin, "nist10", [KEY_256], import_type="NEW_KEY_MATERIAL"), 400, "invalid_request"
    )
    assert_error(import_material(client, admin, "nist10", [other], import_type="OTHER"), 400, "invalid_request")
    second = import_material(client, admin, "nist10", [other], import_type="NEW_KEY_MATERIAL")
    assert second.json()["primary_version"] == 2, second.text
    records = client.get("/v1/audit", params={"key": "nist10"}, headers=admin).json()["records"]
    imports = [(r["outcome"], r["details"].get("import_type")) for r in records if r["action"] == "key.import"]
    assert imports.count(("ok", "NEW_KEY_MATERIAL")) == 1
    assert imports.count(("ok", "EXISTING_KEY_MATERIAL")) == 2
    token = _tokenize(client, billing, "nist10", "0123456789").json()
    assert token["key_version"] == 2 and token["token"] != "6657667009"
    old = client.post("/v1/keys/nist10/detokenize", json={"token": "6657667009", "key_version": 1}, headers=billing)
    assert old.json() == {"value": "0123456789"}
    assert_error(client.post("/v1/keys/nist10/rotate", headers=admin), 409, "conflict")


@pytest.mark.parametrize(
    ("algorithm", "parts"), [("AES_256_GCM", 1), ("AES_256_CBC_HMAC_SHA256", 2), ("HMAC_SHA256", 1)]
)
def test_imported_keys_of_every_algorithm_work(
    client: TestClient,
    admin: dict[str, str],
    billing: dict[str, str],
    external_key: Callable[..., dict[str, Any]],
    hsm: Hsm,
    algorithm: str,
    parts: int,
) -> None:
    if not hsm.capabilities().has(algorithm):  # the token lacks it: an external key of it is refused by name
        body = {"name": "mine", "algorithm": algorithm, "origin": "external", "policy": POLICY}
        refused = assert_error(client.post("/v1/keys", json=body, headers=admin), 400, "invalid_request")
        assert f"does not support {algorithm} (no CKM_" in refused["error"]["message"]
        return
    external_key("mine", algorithm)
    done = import_material(client, admin, "mine", [os.urandom(32) for _ in range(parts)])
    assert done.status_code == 200, done.text
    if algorithm == "HMAC_SHA256":
        client.patch("/v1/keys/mine", json={"policy": {"mac": ["billing"]}}, headers=admin)
        mac = client.post("/v1/keys/mine/mac", json={"data": b64(b"x")}, headers=billing)
        assert mac.status_code == 200 and len(base64.b64decode(mac.json()["mac"])) == 32
        return
    sealed = client.post("/v1/keys/mine/encrypt", json={"plaintext": b64(b"card")}, headers=billing).json()
    opened = client.post("/v1/keys/mine/decrypt", json={"ciphertext": sealed["ciphertext"]}, headers=billing)
    assert opened.json() == {"plaintext": b64(b"card")}


def test_refusals_are_clear_and_leave_nothing(
    client: TestClient,
    admin: dict[str, str],
    billing: dict[str, str],
    hsm: Hsm,
    new_key: Callable[..., dict[str, Any]],
    external_key: Callable[..., dict[str, Any]],
) -> None:
    key = external_key("nist10", fmt=DIGITS)
    assert_error(import_material(client, admin, "nist10", [KEY_256[:16]]), 400, "invalid_request")
    assert_error(import_material(client, admin, "nist10", [KEY_256, KEY_256]), 400, "invalid_request")
    bogus = {"import_token": "RSAES_OAEP_SHA_1.9999999999." + "0" * 32, "encrypted_key_material": b64(bytes(256))}
    assert_error(client.post("/v1/keys/nist10/import", json=bogus, headers=admin), 400, "invalid_request")
    unknown = client.post(
        "/v1/keys/nist10/import-parameters", json={"wrapping_algorithm": "RSAES_OAEP_SHA_256"}, headers=admin
    )
    assert_error(unknown, 400, "invalid_request")
    assert client.get("/v1/keys/nist10", headers=admin).json()["state"] == "pending_import"
    assert hsm.find_labels(f"km/{key['id']}/") == []
    new_key("generated", {}, "AES_256_CBC_HMAC_SHA256")
    generated = client.post("/v1/keys/generated/import-parameters", json={}, headers=admin)
    assert_error(generated, 409, "conflict")
    params = client.post("/v1/keys/nist10/import-parameters", json={}, headers=billing)
    assert_error(params, 403, "forbidden")
    assert_error(client.patch("/v1/keys/nist10", json={"enabled": True}, headers=admin), 409, "conflict")
    with_schedule = {"name": "sched", "origin": "external", "rotation_period_days": 30}
    assert_error(client.post("/v1/keys", json=with_schedule, headers=admin), 400, "invalid_request")
