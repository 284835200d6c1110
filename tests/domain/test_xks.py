"""The XKS proxy API's formats: the spec's worked integrity value, the AAD, the metadata, paths and fields."""

from __future__ import annotations

import base64

import pytest

from keymanager import errors
from keymanager.domain import xks

# The spec's Encrypt example (Appendix C): its request's AAD and its answer's fields.
_AAD = b"project=nile,department=marketing"
_METADATA = base64.b64decode("a2V5X3ZlcnNpb249MQ==")
_IV = base64.b64decode("HMrlRw85cAJUd5Ax")
_CIPHERTEXT = base64.b64decode("ghxkK1txeDNn3q8Y")
_TAG = base64.b64decode("vBxN2ncH1oEkR8WVXpmyYQ==")


def test_integrity_value_is_the_specs_worked_example() -> None:
    value = xks.integrity_value(_AAD, _METADATA, _IV, _CIPHERTEXT, _TAG)
    assert value.hex() == "a8703f2260bd8791ec2d15ea0b23e65a0631eedcf2a13a65cc82db3f47cf5ec7"
    assert xks.encode(value) == "qHA/ImC9h5HsLRXqCyPmWgYx7tzyoTplzILbP0fPXsc="


def test_integrity_value_of_absent_fields_is_over_the_rest() -> None:
    assert xks.integrity_value(b"", b"", _IV, _CIPHERTEXT, _TAG) == xks.integrity_value(
        _IV, b"", b"", _CIPHERTEXT, _TAG
    )


def test_gcm_aad_carries_both_lengths() -> None:
    assert xks.gcm_aad(_AAD, _METADATA) == b"\x00\x21" + _AAD + b"\x0d" + _METADATA
    assert xks.gcm_aad(b"", b"") == b"\x00\x00\x00"
    # The spec's example of a mix-up: metadata passed as AAD must not give the same AAD.
    assert xks.gcm_aad(b"", b"km:xks1:1") != xks.gcm_aad(b"km:xks1:1", b"")


@pytest.mark.parametrize("version", [1, 2, 99, 999_999_999])
def test_metadata_names_the_key_version_within_20_bytes(version: int) -> None:
    metadata = xks.metadata_of(version)
    assert len(metadata) <= xks.MAX_METADATA_BYTES
    assert xks.version_of(metadata) == version


@pytest.mark.parametrize("metadata", [b"", b"km:xks1:0", b"km:xks1:01", b"km:xks2:1", b"key_version=1", b"km:xks1:1 "])
def test_metadata_not_ours_is_an_invalid_ciphertext(metadata: bytes) -> None:
    with pytest.raises(xks.XksError) as refused:
        xks.version_of(metadata)
    assert (refused.value.name, refused.value.status) == ("InvalidCiphertextException", 400)


def test_paths() -> None:
    assert xks.parse_path("/keystores/prod/kms/xks/v1/keys/cards.key-1_a/encrypt") == xks.XksPath(
        "keystores/prod", "Encrypt", "cards.key-1_a"
    )
    assert xks.parse_path("/p/kms/xks/v1/keys/k/metadata").operation == "GetKeyMetadata"
    assert xks.parse_path("/p/kms/xks/v1/keys/k/decrypt").operation == "Decrypt"
    assert xks.parse_path("/p/kms/xks/v1/health") == xks.XksPath("p", "GetHealthStatus", None)


@pytest.mark.parametrize(
    "path",
    [
        "/kms/xks/v1/health",  # no prefix: every key store has one
        "/p/kms/xks/v2/health",
        "/p/kms/xks/v1/keys/k/sign",
        "/p/kms/xks/v1/keys/k",
        "/p/kms/xks/v1/keys/k%2F/encrypt",
        "/p/kms/xks/v1/keys/" + "k" * 129 + "/encrypt",
        "/p//q/kms/xks/v1/health",
        "/p q/kms/xks/v1/health",
        "/p/kms/xks/v1/health/",
    ],
)
def test_other_paths_are_invalid_uri_paths(path: str) -> None:
    with pytest.raises(xks.XksError) as refused:
        xks.parse_path(path)
    assert (refused.value.name, refused.value.status) == ("InvalidUriPathException", 404)


def test_prefix_rule() -> None:
    assert xks.is_prefix("keystores/4a0d79d6-1d1b-49fd-9dbe-799cb9c0fb3f")
    assert xks.is_prefix("a" * 116) and not xks.is_prefix("a" * 117)  # XksProxyUriPath <= 128
    assert len(xks.uri_path("a" * 116)) == xks.MAX_URI_PATH
    for bad in ("", "/p", "p/", "p//q", "p.q", "p q", "p/kms/xks/v1", "kms/xks/v1/q"):
        assert not xks.is_prefix(bad), bad


def test_blob_fields() -> None:
    assert xks.blob({"f": "SGVsbG8gV29ybGQh"}, "f", high=12) == b"Hello World!"
    assert xks.blob({}, "f", high=12, required=False) is None
    for params, name in (
        ({}, "ValidationException"),
        ({"f": "SGVsbG8gV29ybGQh="}, "ValidationException"),  # not padded right
        ({"f": "SGVsbG8_V29ybGQh"}, "ValidationException"),  # URL-safe alphabet
        ({"f": ""}, "ValidationException"),
        ({"f": 12}, "ValidationException"),
        ({"f": "SGVsbG8gV29ybGQhIQ=="}, "UnsupportedOperationException"),  # 13 bytes
    ):
        with pytest.raises(xks.XksError) as refused:
            xks.blob(params, "f", high=12)
        assert refused.value.name == name, params


def test_decrypt_fields_refuse_as_invalid_ciphertext() -> None:
    good = {
        "ciphertext": xks.encode(b"x" * 12),
        "initializationVector": xks.encode(b"i" * 12),
        "authenticationTag": xks.encode(b"t" * 16),
        "ciphertextMetadata": xks.encode(b"km:xks1:7"),
    }
    assert xks.ciphertext_fields(good) == (b"", b"x" * 12, b"i" * 12, b"t" * 16, 7)
    for change in (
        {"initializationVector": xks.encode(b"i" * 16)},  # the spec's other length: never ours
        {"initializationVector": xks.encode(b"i" * 11)},
        {"authenticationTag": xks.encode(b"t" * 12)},
        {"ciphertextMetadata": None},
        {"ciphertext": "not base64"},
        {"additionalAuthenticatedData": "@@@@"},
        {"additionalAuthenticatedData": xks.encode(b"a" * 8193)},
    ):
        with pytest.raises(xks.XksError) as refused:
            xks.ciphertext_fields({k: v for k, v in {**good, **change}.items() if v is not None})
        assert refused.value.name == "InvalidCiphertextException", change
        assert refused.value.message == xks.invalid_ciphertext().message


def test_request_metadata_accepts_any_operation_and_keeps_known_fields() -> None:
    params = {
        "requestMetadata": {
            "awsPrincipalArn": "arn:aws:iam::123456789012:user/Alice",
            "kmsKeyArn": "arn:aws:kms:us-east-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "kmsOperation": "BulkEncryptOfTheFuture",
            "kmsRequestId": "4112f4d6-db54-4af4-ae30-c55a22a8dfae",
            "kmsViaService": "ebs",
            "someFieldOfTheFuture": {"x": 1},
        }
    }
    kept = xks.request_metadata(params, "Encrypt")
    assert kept["kmsOperation"] == "BulkEncryptOfTheFuture" and kept["kmsViaService"] == "ebs"
    assert "someFieldOfTheFuture" not in kept


@pytest.mark.parametrize(
    "metadata",
    [None, "x", {"kmsOperation": "Encrypt", "kmsRequestId": "r"}, {"awsPrincipalArn": 1, "kmsOperation": "E"}],
)
def test_request_metadata_refusals(metadata: object) -> None:
    with pytest.raises(xks.XksError) as refused:
        xks.request_metadata({"requestMetadata": metadata}, "Encrypt")
    assert refused.value.name == "ValidationException"


@pytest.mark.parametrize(
    "metadata",
    [None, {}, {"kmsOperation": "KmsHealthCheck"}, {"kmsRequestId": "r"}, {"kmsOperation": 1, "kmsRequestId": "r"}],
)
def test_a_health_checks_metadata_names_its_operation_and_request(metadata: object) -> None:
    with pytest.raises(xks.XksError) as refused:
        xks.request_metadata({} if metadata is None else {"requestMetadata": metadata}, "GetHealthStatus")
    assert refused.value.name == "ValidationException"
    kept = xks.request_metadata({"requestMetadata": {"kmsOperation": "Future", "kmsRequestId": "r"}}, "GetHealthStatus")
    assert kept == {"kmsOperation": "Future", "kmsRequestId": "r"}


def test_service_errors_become_the_specs() -> None:
    cases = {
        errors.DecryptionFailed(): ("InvalidCiphertextException", 400),
        errors.VersionBelowMinimum(): ("InvalidCiphertextException", 400),
        errors.KeyNotFound(): ("KeyNotFoundException", 404),
        xks.KeyUnseen(): ("KeyNotFoundException", 404),
        errors.Forbidden(): ("InvalidKeyUsageException", 400),
        errors.KeyDisabled(): ("InvalidStateException", 400),
        errors.KeyPendingDeletion(): ("InvalidStateException", 400),
        errors.RateLimited(): ("ThrottlingException", 429),
        errors.HsmUnavailable(): ("DependencyTimeoutException", 503),
        errors.DatabaseUnavailable(): ("DependencyTimeoutException", 503),
        errors.KeyManagerError(): ("InternalException", 500),
    }
    for error, expected in cases.items():
        mapped = xks.xks_error(error)
        assert (mapped.name, mapped.status) == expected, error
        assert mapped.message.isascii() and mapped.message.isprintable() and len(mapped.message) < 512


def test_error_messages_are_printable_ascii_under_512_characters() -> None:
    refused = xks.XksError("AuthenticationFailedException", "the signed header h\u00e9\n" + "x" * 600 + " is missing")
    assert refused.message.isascii() and refused.message.isprintable() and len(refused.message) == 511
    assert refused.message.startswith("the signed header h??")
