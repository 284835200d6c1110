"""Every XKS operation and every refusal of a request's signature or scope, signed by botocore and by curl."""

from __future__ import annotations

import base64
import hashlib

from tests.xks.conftest import KeyStore, Signer, health_path, key_path, metadata

HELLO = base64.b64encode(b"Hello World!").decode()
AAD = base64.b64encode(b"project=nile,department=marketing").decode()


def encrypt_body(**extra: object) -> dict[str, object]:
    return {
        "requestMetadata": metadata("Encrypt"),
        "plaintext": HELLO,
        "encryptionAlgorithm": "AES_GCM",
        "additionalAuthenticatedData": AAD,
        "ciphertextDataIntegrityValueAlgorithm": "SHA_256",
        **extra,
    }


def test_health(signer: Signer, store_a: KeyStore) -> None:
    answer = signer(store_a, health_path(store_a), {"requestMetadata": metadata("KmsHealthCheck")})
    assert answer.status == 200, answer.body
    assert answer.body["xksProxyFleetSize"] >= 1
    assert answer.body["xksProxyVendor"] == "keymanager" and answer.body["xksProxyModel"].startswith("keymanager")
    assert answer.body["ekmVendor"] == "SoftHSM project"
    (fleet,) = answer.body["ekmFleetDetails"]
    assert fleet["healthStatus"] == "ACTIVE" and fleet["model"] == "SoftHSM v2" and fleet["id"]


def test_metadata(signer: Signer, store_a: KeyStore, both_key: str) -> None:
    answer = signer(store_a, key_path(store_a, "xks-both", "metadata"), {"requestMetadata": metadata("CreateKey")})
    assert answer.status == 200, answer.body
    assert answer.body == {"keySpec": "AES_256", "keyUsage": ["ENCRYPT", "DECRYPT"], "keyStatus": "ENABLED"}
    by_id = signer(store_a, key_path(store_a, both_key, "metadata"), {"requestMetadata": metadata("DescribeKey")})
    assert by_id.body == answer.body


def test_encrypt_then_decrypt(signer: Signer, store_a: KeyStore, both_key: str) -> None:
    sealed = signer(store_a, key_path(store_a, "xks-both", "encrypt"), encrypt_body())
    assert sealed.status == 200, sealed.body
    fields = {name: base64.b64decode(sealed.body[name]) for name in sealed.body}
    assert len(fields["ciphertext"]) == 12 and len(fields["initializationVector"]) == 12
    assert len(fields["authenticationTag"]) == 16 and fields["ciphertextMetadata"] == b"km:xks1:1"
    covered = b"".join(
        [base64.b64decode(AAD), *(fields[n] for n in ("ciphertextMetadata", "initializationVector", "ciphertext"))]
    )
    assert fields["ciphertextDataIntegrityValue"] == hashlib.sha256(covered + fields["authenticationTag"]).digest()
    opened = signer(
        store_a,
        key_path(store_a, both_key, "decrypt"),
        {
            "requestMetadata": metadata("Decrypt"),
            "encryptionAlgorithm": "AES_GCM",
            "additionalAuthenticatedData": AAD,
            **{n: sealed.body[n] for n in ("ciphertext", "ciphertextMetadata", "initializationVector")},
            "authenticationTag": sealed.body["authenticationTag"],
        },
    )
    assert opened.status == 200, opened.body
    assert opened.body == {"plaintext": HELLO}


def test_get_on_an_operation_is_405(signer: Signer, store_a: KeyStore, both_key: str) -> None:
    for path in (key_path(store_a, "xks-both", "encrypt"), health_path(store_a)):
        answer = signer(store_a, path, b"", method="GET")
        assert answer.status == 405, answer.body
        unsigned = signer(store_a, path, b"", method="GET", signed=False)
        assert unsigned.status == 405


def test_wrong_service_is_refused(signer: Signer, store_a: KeyStore, both_key: str) -> None:
    answer = signer(store_a, key_path(store_a, "xks-both", "encrypt"), encrypt_body(), service="kms")
    assert (answer.status, answer.error) == (401, "AuthenticationFailedException")
    health = signer(store_a, health_path(store_a), {"requestMetadata": metadata("KmsHealthCheck")}, service="kms")
    assert (health.status, health.error) == (401, "AuthenticationFailedException")


def test_another_region_is_refused(signer: Signer, store_a: KeyStore, both_key: str) -> None:
    answer = signer(store_a, key_path(store_a, "xks-both", "encrypt"), encrypt_body(), region="us-east-1")
    assert (answer.status, answer.error) == (401, "AuthenticationFailedException")


def test_another_stores_prefix_is_refused(signer: Signer, store_a: KeyStore, store_b: KeyStore, both_key: str) -> None:
    answer = signer(store_a, key_path(store_b, "xks-both", "encrypt"), encrypt_body())
    assert (answer.status, answer.error) == (404, "InvalidUriPathException")
    health = signer(store_a, health_path(store_b), {"requestMetadata": metadata("KmsHealthCheck")})
    assert (health.status, health.error) == (404, "InvalidUriPathException")
    own = signer(store_b, key_path(store_b, "xks-both", "encrypt"), encrypt_body())
    assert (own.status, own.error) == (404, "KeyNotFoundException")  # its own prefix: the key is not its


def test_unsigned_and_wrongly_signed_requests_are_refused(signer: Signer, store_a: KeyStore, both_key: str) -> None:
    path = key_path(store_a, "xks-both", "encrypt")
    for answer in (
        signer(store_a, path, encrypt_body(), signed=False),
        signer(store_a, path, encrypt_body(), secret=store_a.secret_access_key[::-1]),
        signer(store_a, health_path(store_a), {"requestMetadata": metadata("KmsHealthCheck")}, signed=False),
    ):
        assert (answer.status, answer.error) == (401, "AuthenticationFailedException")
        assert "plaintext" not in answer.body and "ciphertext" not in answer.body


def test_other_paths_are_invalid_uri_paths(signer: Signer, store_a: KeyStore) -> None:
    for path in (
        f"/{store_a.prefix}/kms/xks/v1/keys/xks-both/sign",
        f"/{store_a.prefix}/kms/xks/v2/health",
        "/kms/xks/v1/health",
    ):
        answer = signer(store_a, path, {"requestMetadata": metadata()})
        assert (answer.status, answer.error) == (404, "InvalidUriPathException"), path
