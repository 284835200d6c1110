"""The XKS door reads bodies with the shared strict decoder (``domain/strict_json.py``), after the
signature (issue 41, item 6): a key named twice, ``NaN`` and nesting deeper than 64 are
``ValidationException`` (before: ``json.loads`` took the last key and NaN, 200, and 30,000 levels
were a 500 ``InternalException``), on every path; a stranger's body is refused for its signature
whatever it holds."""

from __future__ import annotations

import base64
import json

import pytest

from tests.xks.conftest import KeyStore, Signer, health_path, key_path, metadata


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encrypt_text(**fields: str) -> str:
    """An encrypt body as text, its fields' values given as JSON text."""
    good = {
        "requestMetadata": json.dumps(metadata()),
        "plaintext": json.dumps(b64(b"x")),
        "encryptionAlgorithm": '"AES_GCM"',
    }
    return "{" + ", ".join(f'"{name}": {value}' for name, value in {**good, **fields}.items()) + "}"


REFUSED = {
    "a key named twice": encrypt_text(plaintext='"eA=="')[:-1] + ', "plaintext": "eQ=="}',
    "a key named twice, nested": encrypt_text(requestMetadata=json.dumps(metadata())[:-1] + ', "kmsOperation": "X"}'),
    "NaN": encrypt_text(extra="NaN"),
    "Infinity": encrypt_text(extra="-Infinity"),
    "65 levels": encrypt_text(extra="[" * 65 + "]" * 65),
    "30,000 levels": "[" * 30_000 + "]" * 30_000,
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_strict_json_is_refused_on_encrypt(
    botocore_signer: Signer, store_a: KeyStore, both_key: str, case: str
) -> None:
    answer = botocore_signer(store_a, key_path(store_a, "xks-both", "encrypt"), REFUSED[case].encode())
    assert (answer.status, answer.error) == (400, "ValidationException"), answer.body
    assert "internal" not in str(answer.body).lower()


def test_a_shallow_body_with_brackets_in_its_strings_is_served(
    botocore_signer: Signer, store_a: KeyStore, both_key: str
) -> None:
    body = encrypt_text(requestMetadata=json.dumps(metadata(kmsRequestId="[" * 100)), extra="[[[1]]]")
    answer = botocore_signer(store_a, key_path(store_a, "xks-both", "encrypt"), body.encode())
    assert answer.status == 200, answer.body


def test_strict_json_is_refused_on_the_health_path_too(botocore_signer: Signer, store_a: KeyStore) -> None:
    twice = b'{"requestMetadata": {"kmsOperation": "KmsHealthCheck", "kmsRequestId": "1", "kmsRequestId": "2"}}'
    for body in (twice, ("[" * 30_000).encode(), b'{"requestMetadata": {"kmsOperation": NaN}}'):
        answer = botocore_signer(store_a, health_path(store_a), body)
        assert (answer.status, answer.error) == (400, "ValidationException"), answer.body
        assert "internal" not in str(answer.body).lower()


def test_an_unsigned_body_is_refused_for_its_signature_whatever_it_holds(
    botocore_signer: Signer, store_a: KeyStore
) -> None:
    for body in (("[" * 30_000).encode(), b'{"a": NaN, "a": 1}'):
        answer = botocore_signer(store_a, key_path(store_a, "xks-both", "encrypt"), body, signed=False)
        assert (answer.status, answer.error) == (401, "AuthenticationFailedException"), answer.body
