"""The XKS proxy API specification's request rules, one test per rule, as AWS's own test client
(``aws-samples/aws-kms-xksproxy-test-client``: ``test_get_health_status``, ``test_get_key_metadata``,
``test_encrypt_decrypt``, ``test_encrypt_only_key``, ``test_decrypt_only_key``, ``test_impotent_key``)
asks them of a proxy, over real TLS and signed by botocore (``aws/aws-kms-xksproxy-api-spec``,
``xks_proxy_api_spec.md``: each operation's *Request Payload Parameters*, *Error codes*, Appendix B
and Appendix C)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from tests.e2e.conftest import Server
from tests.xks.conftest import KeyStore, Signer, health_path, key_path, metadata, new_key

PLAINTEXT = base64.b64encode(b"plaintext\n").decode()
AAD = base64.b64encode(b"project=nile,department=marketing").decode()
REQUIRED = {
    "GetKeyMetadata": ("awsPrincipalArn", "kmsOperation", "kmsRequestId"),
    "Encrypt": ("awsPrincipalArn", "kmsKeyArn", "kmsOperation", "kmsRequestId"),
    "Decrypt": ("awsPrincipalArn", "kmsKeyArn", "kmsOperation", "kmsRequestId"),
    "GetHealthStatus": ("kmsOperation", "kmsRequestId"),
}
"""The REQUIRED fields of each operation's ``requestMetadata`` (the spec's words)."""
OPTIONAL = ("awsSourceVpc", "awsSourceVpce", "kmsViaService")


@pytest.fixture(scope="module")
def sign(botocore_signer: Signer) -> Signer:
    return botocore_signer


@pytest.fixture(scope="module")
def usages(xks_server: Server, store_a: KeyStore) -> dict[str, str]:
    """The test client's keys, by usage: both, encrypt-only, decrypt-only and impotent (neither)."""
    name = store_a.name
    policies = {
        "both": {"encrypt": [name], "decrypt": [name]},
        "encrypt-only": {"encrypt": [name]},
        "decrypt-only": {"decrypt": [name]},
        "impotent": {"generate_data_key": [name]},  # seen by the store, usable for neither
    }
    return {usage: new_key(xks_server, f"xks-conf-{usage}", policy) for usage, policy in policies.items()}


def encrypt_body(operation: str = "Encrypt", *, aad: str | None = None, cdiv: bool = False, **extra: Any) -> Any:
    body: dict[str, Any] = {
        "requestMetadata": metadata(operation),
        "plaintext": PLAINTEXT,
        "encryptionAlgorithm": "AES_GCM",
    }
    if aad is not None:
        body["additionalAuthenticatedData"] = aad
    if cdiv:
        body["ciphertextDataIntegrityValueAlgorithm"] = "SHA_256"
    return {**body, **extra}


def decrypt_body(sealed: dict[str, Any], *, aad: str | None = None) -> dict[str, Any]:
    fields = ("ciphertext", "ciphertextMetadata", "initializationVector", "authenticationTag")
    body = {"requestMetadata": metadata("Decrypt"), "encryptionAlgorithm": "AES_GCM", **{f: sealed[f] for f in fields}}
    return body if aad is None else {**body, "additionalAuthenticatedData": aad}


def path_of(store: KeyStore, operation: str, key: str) -> str:
    names = {"GetKeyMetadata": "metadata", "Encrypt": "encrypt", "Decrypt": "decrypt"}
    return health_path(store) if operation == "GetHealthStatus" else key_path(store, key, names[operation])


def body_of(operation: str, request_metadata: Any, sealed: dict[str, Any]) -> dict[str, Any]:
    """A request of ``operation`` that is valid but for its ``requestMetadata``."""
    body = {"GetKeyMetadata": {}, "Encrypt": encrypt_body(), "Decrypt": decrypt_body(sealed)}.get(operation, {})
    return {**body, "requestMetadata": request_metadata}


@pytest.fixture(scope="module")
def sealed(sign: Signer, store_a: KeyStore, usages: dict[str, str]) -> dict[str, Any]:
    made = sign(store_a, key_path(store_a, usages["both"], "encrypt"), encrypt_body())
    assert made.status == 200, made.body
    return made.body


# -- requestMetadata: per operation, each field ------------------------------------------------------


@pytest.mark.parametrize("operation", list(REQUIRED))
def test_without_request_metadata_or_with_an_empty_one_is_a_validation_error(
    sign: Signer, store_a: KeyStore, usages: dict[str, str], sealed: dict[str, Any], operation: str
) -> None:
    path = path_of(store_a, operation, usages["both"])
    without = {k: v for k, v in body_of(operation, {}, sealed).items() if k != "requestMetadata"}
    for body in (without, body_of(operation, {}, sealed), body_of(operation, "not an object", sealed)):
        answer = sign(store_a, path, body)
        assert (answer.status, answer.error) == (400, "ValidationException"), (operation, body)


@pytest.mark.parametrize(("operation", "field"), [(op, field) for op, fields in REQUIRED.items() for field in fields])
def test_each_required_field_is_required(
    sign: Signer, store_a: KeyStore, usages: dict[str, str], sealed: dict[str, Any], operation: str, field: str
) -> None:
    path = path_of(store_a, operation, usages["both"])
    complete = metadata(operation)
    assert sign(store_a, path, body_of(operation, complete, sealed)).status == 200
    for broken in ({k: v for k, v in complete.items() if k != field}, {**complete, field: 7}, {**complete, field: ""}):
        answer = sign(store_a, path, body_of(operation, broken, sealed))
        assert (answer.status, answer.error) == (400, "ValidationException"), broken
        assert field in answer.body["errorMessage"]


@pytest.mark.parametrize("operation", list(REQUIRED))
def test_optional_opaque_and_future_fields_are_accepted(
    sign: Signer, store_a: KeyStore, usages: dict[str, str], sealed: dict[str, Any], operation: str
) -> None:
    """kmsOperation and kmsRequestId are opaque (any value; "MUST NOT perform any validation on its
    structure"), the OPTIONAL fields may come or not, ARNs are up to 2,048 characters, and fields AWS
    may add later (Appendix B) are ignored; GetKeyMetadata's kmsKeyArn is optional (CreateKey)."""
    path = path_of(store_a, operation, usages["both"])
    bare = {field: metadata(operation)[field] for field in REQUIRED[operation]}
    arn = "arn:aws:iam::123456789012:role/" + "r" * (2048 - len("arn:aws:iam::123456789012:role/"))
    variants = [
        bare,
        {**bare, "kmsOperation": "BulkFutureOperation", "kmsRequestId": "not-a-uuid"},
        {**bare, **{field: f"{field}-value" for field in OPTIONAL}},
        {**bare, "SourceIdentity": "alice", "kmsRecipientAttestationPCR0": {"nested": True}},
    ]
    if "awsPrincipalArn" in bare:
        variants.append({**bare, "awsPrincipalArn": arn})
    for variant in variants:
        answer = sign(store_a, path, body_of(operation, variant, sealed))
        assert answer.status == 200, (variant, answer.body)
    too_long = {**bare, "kmsRequestId": "r" * 2049}
    assert sign(store_a, path, body_of(operation, too_long, sealed)).error == "ValidationException"


# -- GetHealthStatus and GetKeyMetadata: the answers' shapes ------------------------------------------------


def test_health_status_has_the_specs_shape(sign: Signer, store_a: KeyStore) -> None:
    answer = sign(store_a, health_path(store_a), {"requestMetadata": metadata("KmsHealthCheck")})
    assert answer.status == 200, answer.body
    body = answer.body
    assert set(body) == {"xksProxyFleetSize", "xksProxyVendor", "xksProxyModel", "ekmVendor", "ekmFleetDetails"}
    assert isinstance(body["xksProxyFleetSize"], int) and body["xksProxyFleetSize"] > 0
    assert all(isinstance(body[name], str) and body[name] for name in ("xksProxyVendor", "xksProxyModel", "ekmVendor"))
    assert 1 <= len(body["ekmFleetDetails"]) <= 10
    for entry in body["ekmFleetDetails"]:
        assert set(entry) == {"id", "model", "healthStatus"} and entry["id"] and entry["model"]
        assert entry["healthStatus"] in ("ACTIVE", "DEGRADED", "UNAVAILABLE")
    for operation in ("CreateCustomKeyStore", "ConnectCustomKeyStore", "UpdateCustomKeyStore", "SomethingNew"):
        assert sign(store_a, health_path(store_a), {"requestMetadata": metadata(operation)}).status == 200


def test_key_metadata_has_the_specs_shape_for_every_usage(
    sign: Signer, store_a: KeyStore, usages: dict[str, str]
) -> None:
    expected = {
        "both": ["ENCRYPT", "DECRYPT"],
        "encrypt-only": ["ENCRYPT"],
        "decrypt-only": ["DECRYPT"],
        "impotent": [],
    }
    for usage, key in usages.items():
        for operation in ("DescribeKey", "CreateKey"):
            answer = sign(store_a, key_path(store_a, key, "metadata"), {"requestMetadata": metadata(operation)})
            assert answer.body == {"keySpec": "AES_256", "keyUsage": expected[usage], "keyStatus": "ENABLED"}, usage
    missing = sign(store_a, key_path(store_a, "non_existing_key", "metadata"), {"requestMetadata": metadata()})
    assert (missing.status, missing.error) == (404, "KeyNotFoundException")


# -- Encrypt and Decrypt: CDIV and key usage --------------------------------------------------------------


@pytest.mark.parametrize("aad", [AAD, None])
def test_cdiv_is_sha256_over_the_answer_and_the_answer_decrypts(
    sign: Signer, store_a: KeyStore, usages: dict[str, str], aad: str | None
) -> None:
    """Appendix C: SHA-256 of aad ‖ ciphertextMetadata ‖ initializationVector ‖ ciphertext ‖ authenticationTag."""
    key = usages["both"]
    made = sign(store_a, key_path(store_a, key, "encrypt"), encrypt_body(aad=aad, cdiv=True))
    assert made.status == 200, made.body
    fields = ("ciphertextMetadata", "initializationVector", "ciphertext", "authenticationTag")
    covered = base64.b64decode(aad or "") + b"".join(base64.b64decode(made.body[f]) for f in fields)
    assert base64.b64decode(made.body["ciphertextDataIntegrityValue"]) == hashlib.sha256(covered).digest()
    opened = sign(store_a, key_path(store_a, key, "decrypt"), decrypt_body(made.body, aad=aad))
    assert opened.body == {"plaintext": PLAINTEXT}
    plain = sign(store_a, key_path(store_a, key, "encrypt"), encrypt_body(aad=aad))
    assert "ciphertextDataIntegrityValue" not in plain.body  # only when asked


@pytest.mark.parametrize("aad", [AAD, None])
def test_an_encrypt_only_key_encrypts_but_gives_no_cdiv_and_does_not_decrypt(
    sign: Signer, store_a: KeyStore, usages: dict[str, str], aad: str | None
) -> None:
    key = usages["encrypt-only"]
    made = sign(store_a, key_path(store_a, key, "encrypt"), encrypt_body(aad=aad))
    assert made.status == 200, made.body
    refused = sign(store_a, key_path(store_a, key, "decrypt"), decrypt_body(made.body, aad=aad))
    assert (refused.status, refused.error) == (400, "InvalidKeyUsageException")
    asked = sign(store_a, key_path(store_a, key, "encrypt"), encrypt_body(aad=aad, cdiv=True))
    assert (asked.status, asked.error) == (400, "InvalidKeyUsageException"), asked.body
    assert "ciphertext" not in asked.body


@pytest.mark.parametrize("usage", ["decrypt-only", "impotent"])
def test_a_key_without_encrypt_refuses_every_encrypt(
    sign: Signer, store_a: KeyStore, usages: dict[str, str], usage: str
) -> None:
    for aad in (AAD, None):
        for cdiv in (False, True):
            answer = sign(store_a, key_path(store_a, usages[usage], "encrypt"), encrypt_body(aad=aad, cdiv=cdiv))
            assert (answer.status, answer.error) == (400, "InvalidKeyUsageException"), (usage, aad, cdiv)


def test_a_decrypt_only_key_decrypts(
    sign: Signer, xks_server: Server, store_a: KeyStore, usages: dict[str, str]
) -> None:
    """What a store's key encrypted while it could still encrypt, it decrypts once it can only decrypt."""
    name = "xks-conf-retiring"
    new_key(xks_server, name, {"encrypt": [store_a.name], "decrypt": [store_a.name]})
    made = sign(store_a, key_path(store_a, name, "encrypt"), encrypt_body(aad=AAD))
    with xks_server.client(xks_server.admin_token) as admin:
        assert admin.patch(f"/v1/keys/{name}", json={"policy": {"decrypt": [store_a.name]}}).status_code == 200
    assert sign(store_a, key_path(store_a, name, "decrypt"), decrypt_body(made.body, aad=AAD)).body == {
        "plaintext": PLAINTEXT
    }


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"plaintext": None}, "ValidationException"),
        ({"encryptionAlgorithm": None}, "ValidationException"),
        ({"encryptionAlgorithm": "AES_CBC"}, "ValidationException"),
        ({"ciphertextDataIntegrityValueAlgorithm": "SHA_512"}, "ValidationException"),
        ({"additionalAuthenticatedData": "not base64"}, "ValidationException"),
    ],
)
def test_encrypt_field_rules(
    sign: Signer, store_a: KeyStore, usages: dict[str, str], change: dict[str, Any], expected: str
) -> None:
    body = {k: v for k, v in {**encrypt_body(aad=AAD), **change}.items() if v is not None}
    answer = sign(store_a, key_path(store_a, usages["both"], "encrypt"), body)
    assert (answer.status, answer.error) == (400, expected), body


def test_decrypt_with_a_missing_or_another_aad_is_invalid_ciphertext(
    sign: Signer, store_a: KeyStore, usages: dict[str, str]
) -> None:
    key = usages["both"]
    made = sign(store_a, key_path(store_a, key, "encrypt"), encrypt_body(aad=AAD))
    other = base64.b64encode(b"project=blue,department=finance").decode()
    for body in (decrypt_body(made.body), decrypt_body(made.body, aad=other)):
        answer = sign(store_a, key_path(store_a, key, "decrypt"), body)
        assert (answer.status, answer.error) == (400, "InvalidCiphertextException")
    missing = {k: v for k, v in decrypt_body(made.body, aad=AAD).items() if k != "encryptionAlgorithm"}
    assert sign(store_a, key_path(store_a, key, "decrypt"), missing).error == "ValidationException"
