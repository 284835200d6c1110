"""Keys through the XKS door: visibility and usage from the key's policy, states, rotation, tampering,
limits and audit records (requests signed by botocore; ``test_signers.py`` has curl as well)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.e2e.conftest import Server
from tests.xks.conftest import Answer, KeyStore, Signer, key_path, metadata, new_key

AAD = b"the encryption context, as AWS KMS serialises it"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encrypt(sign: Signer, store: KeyStore, key: str, plaintext: bytes, aad: bytes | None = AAD, **extra: Any) -> Answer:
    body: dict[str, Any] = {
        "requestMetadata": metadata("GenerateDataKey"),
        "plaintext": b64(plaintext),
        "encryptionAlgorithm": "AES_GCM",
        **extra,
    }
    if aad is not None:
        body["additionalAuthenticatedData"] = b64(aad)
    return sign(store, key_path(store, key, "encrypt"), body)


def decrypt_body(sealed: dict[str, Any], aad: bytes | None = AAD) -> dict[str, Any]:
    body = {
        "requestMetadata": metadata("Decrypt"),
        "encryptionAlgorithm": "AES_GCM",
        **{name: sealed[name] for name in ("ciphertext", "ciphertextMetadata", "initializationVector")},
        "authenticationTag": sealed["authenticationTag"],
    }
    if aad is not None:
        body["additionalAuthenticatedData"] = b64(aad)
    return body


def decrypt(sign: Signer, store: KeyStore, key: str, body: dict[str, Any]) -> Answer:
    return sign(store, key_path(store, key, "decrypt"), body)


def key_metadata(sign: Signer, store: KeyStore, key: str) -> Answer:
    return sign(store, key_path(store, key, "metadata"), {"requestMetadata": metadata("DescribeKey")})


@pytest.fixture(scope="module")
def sign(botocore_signer: Signer) -> Signer:
    return botocore_signer


def test_round_trip_fails_with_any_byte_changed(sign: Signer, store_a: KeyStore, both_key: str) -> None:
    plaintext = bytes(range(40))
    sealed = encrypt(sign, store_a, "xks-both", plaintext)
    assert sealed.status == 200, sealed.body
    good = decrypt_body(sealed.body)
    assert decrypt(sign, store_a, "xks-both", good).body == {"plaintext": b64(plaintext)}
    answers = []
    for name in ("ciphertext", "ciphertextMetadata", "initializationVector", "authenticationTag"):
        raw = base64.b64decode(good[name])
        for index in range(len(raw)):
            changed = bytearray(raw)
            changed[index] ^= 0x01
            answers.append(decrypt(sign, store_a, "xks-both", {**good, name: b64(bytes(changed))}))
    aad = bytearray(AAD)
    aad[3] ^= 0x80
    answers.append(decrypt(sign, store_a, "xks-both", decrypt_body(sealed.body, bytes(aad))))
    answers.append(decrypt(sign, store_a, "xks-both", decrypt_body(sealed.body, None)))  # AAD left out
    answers.append(decrypt(sign, store_a, "xks-both", decrypt_body(sealed.body, AAD + b"\x00")))
    # The spec's mix-up: the metadata passed as AAD and no metadata at all.
    no_metadata = {k: v for k, v in good.items() if k != "ciphertextMetadata"}
    answers.append(
        decrypt(sign, store_a, "xks-both", {**no_metadata, "additionalAuthenticatedData": good["ciphertextMetadata"]})
    )
    assert {(a.status, a.error, a.body["errorMessage"]) for a in answers} == {
        (400, "InvalidCiphertextException", answers[0].body["errorMessage"])
    }
    assert "plaintext" not in str([a.body for a in answers])


def test_no_aad_and_the_specs_largest_inputs(sign: Signer, store_a: KeyStore, both_key: str) -> None:
    sealed = encrypt(sign, store_a, "xks-both", b"k" * 32, aad=None)
    assert decrypt(sign, store_a, "xks-both", decrypt_body(sealed.body, None)).body == {"plaintext": b64(b"k" * 32)}
    largest = encrypt(sign, store_a, "xks-both", b"p" * 4300, aad=b"a" * 8192)
    assert largest.status == 200, largest.body
    opened = decrypt(sign, store_a, "xks-both", decrypt_body(largest.body, b"a" * 8192))
    assert opened.body == {"plaintext": b64(b"p" * 4300)}
    for too_large in (
        encrypt(sign, store_a, "xks-both", b"p" * 4301),
        encrypt(sign, store_a, "xks-both", b"p", aad=b"a" * 8193),
    ):
        assert (too_large.status, too_large.error) == (501, "UnsupportedOperationException")


def test_bad_input_is_the_specs_error(sign: Signer, store_a: KeyStore, both_key: str) -> None:
    path = key_path(store_a, "xks-both", "encrypt")
    good = {"requestMetadata": metadata(), "plaintext": b64(b"x"), "encryptionAlgorithm": "AES_GCM"}
    for body in (
        {**good, "plaintext": "not base64!"},
        {**good, "plaintext": "eA"},  # unpadded
        {**good, "encryptionAlgorithm": "AES_CBC"},
        {**good, "ciphertextDataIntegrityValueAlgorithm": "MD5"},
        {k: v for k, v in good.items() if k != "requestMetadata"},
        {k: v for k, v in good.items() if k != "plaintext"},
        {**good, "requestMetadata": {"kmsOperation": "Encrypt"}},
        b"not json",
        b"[1, 2]",
    ):
        answer = sign(store_a, path, body)
        assert (answer.status, answer.error) == (400, "ValidationException"), body
    too_big = sign(store_a, path, b" " * (64 * 1024 + 1))
    assert (too_big.status, too_big.error) == (400, "ValidationException")


def test_unknown_kms_operations_are_accepted(sign: Signer, store_a: KeyStore, both_key: str) -> None:
    body = {"requestMetadata": metadata("BulkEncrypt"), "plaintext": b64(b"x"), "encryptionAlgorithm": "AES_GCM"}
    assert sign(store_a, key_path(store_a, "xks-both", "encrypt"), body).status == 200


def test_usage_follows_the_policy(sign: Signer, xks_server: Server, store_a: KeyStore, store_b: KeyStore) -> None:
    name = store_a.name
    new_key(xks_server, "xks-enc-only", {"encrypt": [name]})
    new_key(xks_server, "xks-dec-only", {"decrypt": [name]})
    new_key(xks_server, "xks-gdk-only", {"generate_data_key": [name]})
    new_key(xks_server, "xks-b-only", {"encrypt": [store_b.name], "decrypt": [store_b.name]})
    new_key(xks_server, "xks-cbc", {"encrypt": [name], "decrypt": [name]}, algorithm="AES_256_CBC_HMAC_SHA256")
    assert key_metadata(sign, store_a, "xks-enc-only").body["keyUsage"] == ["ENCRYPT"]
    assert key_metadata(sign, store_a, "xks-dec-only").body["keyUsage"] == ["DECRYPT"]
    assert key_metadata(sign, store_a, "xks-gdk-only").body == {
        "keySpec": "AES_256",
        "keyUsage": [],
        "keyStatus": "ENABLED",
    }
    assert key_metadata(sign, store_a, "xks-cbc").body["keyUsage"] == []
    sealed = encrypt(sign, store_a, "xks-enc-only", b"secret")
    assert sealed.status == 200
    assert decrypt(sign, store_a, "xks-enc-only", decrypt_body(sealed.body)).error == "InvalidKeyUsageException"
    for key in ("xks-dec-only", "xks-gdk-only", "xks-cbc"):
        refused = encrypt(sign, store_a, key, b"secret")
        assert (refused.status, refused.error) == (400, "InvalidKeyUsageException"), key
    for key in ("xks-b-only", "no-such-key", "0" * 32):
        for answer in (key_metadata(sign, store_a, key), encrypt(sign, store_a, key, b"secret")):
            assert (answer.status, answer.error) == (404, "KeyNotFoundException"), key
    assert key_metadata(sign, store_b, "xks-b-only").body["keyUsage"] == ["ENCRYPT", "DECRYPT"]


def test_a_disabled_key_reports_disabled_and_refuses(sign: Signer, xks_server: Server, store_a: KeyStore) -> None:
    new_key(xks_server, "xks-disabled", {"encrypt": [store_a.name], "decrypt": [store_a.name]})
    sealed = encrypt(sign, store_a, "xks-disabled", b"secret")
    with xks_server.client(xks_server.admin_token) as admin:
        assert admin.patch("/v1/keys/xks-disabled", json={"enabled": False}).status_code == 200
    assert key_metadata(sign, store_a, "xks-disabled").body["keyStatus"] == "DISABLED"
    for answer in (
        encrypt(sign, store_a, "xks-disabled", b"secret"),
        decrypt(sign, store_a, "xks-disabled", decrypt_body(sealed.body)),
    ):
        assert (answer.status, answer.error) == (400, "InvalidStateException")
    with xks_server.client(xks_server.admin_token) as admin:
        assert admin.patch("/v1/keys/xks-disabled", json={"enabled": True}).status_code == 200
    assert decrypt(sign, store_a, "xks-disabled", decrypt_body(sealed.body)).status == 200


def test_rotation_keeps_older_ciphertexts(sign: Signer, xks_server: Server, store_a: KeyStore) -> None:
    new_key(xks_server, "xks-rotating", {"encrypt": [store_a.name], "decrypt": [store_a.name]})
    first = encrypt(sign, store_a, "xks-rotating", b"before")
    with xks_server.client(xks_server.admin_token) as admin:
        assert admin.post("/v1/keys/xks-rotating/rotate").status_code == 200
    second = encrypt(sign, store_a, "xks-rotating", b"after")
    assert base64.b64decode(first.body["ciphertextMetadata"]) == b"km:xks1:1"
    assert base64.b64decode(second.body["ciphertextMetadata"]) == b"km:xks1:2"
    assert decrypt(sign, store_a, "xks-rotating", decrypt_body(first.body)).body == {"plaintext": b64(b"before")}
    assert decrypt(sign, store_a, "xks-rotating", decrypt_body(second.body)).body == {"plaintext": b64(b"after")}
    swapped = {**decrypt_body(first.body), "ciphertextMetadata": second.body["ciphertextMetadata"]}
    assert decrypt(sign, store_a, "xks-rotating", swapped).error == "InvalidCiphertextException"
    with xks_server.client(xks_server.admin_token) as admin:
        assert admin.patch("/v1/keys/xks-rotating", json={"min_decryption_version": 2}).status_code == 200
    assert decrypt(sign, store_a, "xks-rotating", decrypt_body(first.body)).error == "InvalidCiphertextException"


def test_audit_records_carry_the_request_metadata(sign: Signer, xks_server: Server, store_a: KeyStore) -> None:
    key_id = new_key(xks_server, "xks-audited", {"encrypt": [store_a.name]})
    extra = {"kmsViaService": "s3", "kmsRequestId": "audit-me-0001"}
    body = {
        "requestMetadata": metadata("GenerateDataKey", **extra),
        "plaintext": b64(b"never in a record"),
        "encryptionAlgorithm": "AES_GCM",
    }
    assert sign(store_a, key_path(store_a, "xks-audited", "encrypt"), body).status == 200
    assert sign(store_a, key_path(store_a, "xks-audited", "decrypt"), decrypt_body(_sealed_like())).status == 400
    with xks_server.client(xks_server.admin_token) as admin:
        records = admin.get("/v1/audit", params={"key": key_id}).json()["records"]
    by_action = {r["action"]: r for r in records}
    done = by_action["xks.Encrypt"]
    assert (done["principal"], done["status"], done["outcome"], done["key_version"]) == (store_a.name, 200, "ok", 1)
    assert done["details"]["kmsRequestId"] == "audit-me-0001" and done["details"]["kmsViaService"] == "s3"
    assert done["details"]["kmsOperation"] == "GenerateDataKey" and done["details"]["externalKeyId"] == "xks-audited"
    refused = by_action["xks.Decrypt"]
    assert (refused["status"], refused["details"]["error"]) == (400, "InvalidKeyUsageException")
    assert b64(b"never in a record") not in str(records) and "never in a record" not in str(records)


def _sealed_like() -> dict[str, str]:
    return {
        "ciphertext": b64(b"c" * 8),
        "ciphertextMetadata": b64(b"km:xks1:1"),
        "initializationVector": b64(b"i" * 12),
        "authenticationTag": b64(b"t" * 16),
    }
