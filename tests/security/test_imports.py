"""Imports that cannot leave a broken or swapped key (hardening II, finding "import length check
bypassed" and "re-import swaps the key"), over a real server.

Bound: key material of any length but the algorithm's is refused with 400 naming the expected
length, on every wrapping path, and the key stays ``pending_import`` (before: 25, 28 and 31 bytes
through ``RSA_AES_KEY_WRAP_SHA_1`` enabled the key, whose every use then answered 503); a re-import
of other material is refused and the key keeps its version and its ciphertexts (before: 32 zero
bytes became a new primary version, audited only as ``key.import``).
"""

from __future__ import annotations

import base64
import os
import secrets
from typing import Any

import httpx
import pytest

from keymanager.hsm.import_parameters import ImportParameters, WrappingAlgorithm
from tests.hsm.test_key_import import wrap
from tests.security.conftest import Server

POLICY = {"encrypt": ["admin"], "decrypt": ["admin"], "mac": ["admin"]}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _pending(admin: httpx.Client, algorithm: str) -> str:
    name = f"imported-{secrets.token_hex(4)}"
    body: dict[str, Any] = {"name": name, "algorithm": algorithm, "origin": "external", "policy": POLICY}
    if algorithm == "FF1_AES_256":
        body["token_format"] = {"alphabet": "digits", "keep_first": 0, "keep_last": 0, "luhn": "ignore"}
    created = admin.post("/v1/keys", json=body)
    assert created.status_code == 201, created.text
    return name


def _parameters(admin: httpx.Client, key: str, wrapping: WrappingAlgorithm) -> ImportParameters:
    got = admin.post(f"/v1/keys/{key}/import-parameters", json={"wrapping_algorithm": wrapping.value})
    assert got.status_code == 200, got.text
    return ImportParameters(base64.b64decode(got.json()["public_key"]), got.json()["import_token"], 0)


def _import(
    admin: httpx.Client,
    key: str,
    materials: list[bytes],
    wrapping: WrappingAlgorithm,
    params: ImportParameters | None = None,
    **extra: str,
) -> httpx.Response:
    """Import ``materials``; under ``params`` when given (a refused import leaves its token usable)."""
    params = params or _parameters(admin, key, wrapping)
    wrapped = [_b64(wrap(params, wrapping, m)) for m in materials]
    body: dict[str, Any] = {"import_token": params.import_token, "encrypted_key_material": wrapped[0], **extra}
    if len(wrapped) > 1:
        body["encrypted_mac_key_material"] = wrapped[1]
    return admin.post(f"/v1/keys/{key}/import", json=body)


@pytest.mark.parametrize("wrapping", [WrappingAlgorithm.RSAES_OAEP_SHA_1, WrappingAlgorithm.RSA_AES_KEY_WRAP_SHA_1])
@pytest.mark.parametrize(
    ("algorithm", "expected", "wrong"),
    [
        ("FF1_AES_256", 32, [16, 24, 25, 28, 31, 33, 48]),
        ("HMAC_SHA256", 32, [16, 24, 33, 40, 64]),
        ("HMAC_SHA512", 64, [32, 56, 65]),
    ],
)
def test_material_of_the_wrong_length_is_refused_naming_the_length(
    server: Server, wrapping: WrappingAlgorithm, algorithm: str, expected: int, wrong: list[int]
) -> None:
    with server.client(server.admin_token) as admin:
        key = _pending(admin, algorithm)
        offered = admin.post(f"/v1/keys/{key}/import-parameters", json={"wrapping_algorithm": wrapping.value})
        if offered.status_code == 400:  # a token without the wrapping algorithm's mechanisms: refused by name
            assert wrapping.value not in offered.json()["error"]["message"]
            assert "RSAES_OAEP_SHA_1" in offered.json()["error"]["message"]
            return
        params = _parameters(admin, key, wrapping)
        for size in wrong:
            refused = _import(admin, key, [os.urandom(size)], wrapping, params)
            assert refused.status_code == 400, (size, refused.text)
            assert refused.json()["error"]["code"] == "invalid_request"
            assert f"exactly {expected} bytes" in refused.json()["error"]["message"], size
            assert admin.get(f"/v1/keys/{key}").json()["state"] == "pending_import"
        assert _import(admin, key, [os.urandom(expected)], wrapping, params).json()["state"] == "enabled"
        used = _import(admin, key, [os.urandom(expected)], wrapping, params)  # the token was used up
        assert used.status_code == 400 and "used already" in used.json()["error"]["message"]


def test_a_re_import_of_other_material_is_refused_and_the_key_keeps_its_material(server: Server) -> None:
    wrapping = WrappingAlgorithm.RSAES_OAEP_SHA_1
    with server.client(server.admin_token) as admin:
        key = _pending(admin, "AES_256_CBC_HMAC_SHA256")
        mine = [os.urandom(32), os.urandom(32)]
        assert _import(admin, key, mine, wrapping).json()["primary_version"] == 1
        sealed = admin.post(f"/v1/keys/{key}/encrypt", json={"plaintext": _b64(b"4111111111111111")}).json()
        params = _parameters(admin, key, wrapping)
        for other in ([bytes(32), bytes(32)], [mine[0], os.urandom(32)]):  # the second swaps the MAC key only
            refused = _import(admin, key, other, wrapping, params)
            assert refused.status_code == 400 and "NEW_KEY_MATERIAL" in refused.json()["error"]["message"]
        same = _import(admin, key, mine, wrapping, params)
        assert same.status_code == 200 and same.json()["primary_version"] == 1
        shown = admin.get(f"/v1/keys/{key}").json()
        assert (shown["primary_version"], [v["version"] for v in shown["versions"]]) == (1, [1])
        opened = admin.post(f"/v1/keys/{key}/decrypt", json={"ciphertext": sealed["ciphertext"]})
        assert base64.b64decode(opened.json()["plaintext"]) == b"4111111111111111"
        records = admin.get("/v1/audit", params={"key": key}).json()["records"]
        outcomes = [(r["outcome"], r["details"].get("import_type")) for r in records if r["action"] == "key.import"]
        assert outcomes.count(("error", "EXISTING_KEY_MATERIAL")) == 2
        new = [os.urandom(32), os.urandom(32)]
        renewed = _import(admin, key, new, wrapping, import_type="NEW_KEY_MATERIAL")
        assert renewed.status_code == 200 and renewed.json()["primary_version"] == 2
