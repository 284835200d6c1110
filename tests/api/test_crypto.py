"""Encryption and decryption over the API, through the real SoftHSM token.

Every cryptographic failure must be indistinguishable: the same status, code and
message (only the request id differs), so the service is no padding oracle.
"""

from __future__ import annotations

import base64
import string
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.domain.credentials import new_id
from tests.api.support import assert_error, b64, unb64, use_policy, without_request_id
from tests.conftest import auth

ALGORITHMS = ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM", "AES_128_GCM", "AES_192_GCM"]
CARD = b"4111111111111111"
DECRYPTION_FAILED = (400, {"error": {"code": "decryption_failed", "message": "decryption failed"}})

B64_ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
HEX = "0123456789abcdef"


@pytest.fixture
def app_headers(new_principal: Callable[..., str]) -> dict[str, str]:
    return auth(new_principal("billing"))


def _encrypt(client: TestClient, headers: dict[str, str], key: str, data: bytes, **extra: Any) -> dict[str, Any]:
    response = client.post(f"/v1/keys/{key}/encrypt", json={"plaintext": b64(data), **extra}, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _decrypt(client: TestClient, headers: dict[str, str], text: str, key: str | None = None, **extra: Any) -> Any:
    path = f"/v1/keys/{key}/decrypt" if key is not None else "/v1/decrypt"
    return client.post(path, json={"ciphertext": text, **extra}, headers=headers)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_round_trips(
    client: TestClient,
    new_key: Callable[..., dict[str, Any]],
    app_headers: dict[str, str],
    algorithm: str,
) -> None:
    key = new_key("cards", use_policy("billing"), algorithm)
    assert key["algorithm"] == algorithm
    for size in (0, 1, 15, 16, 17, 64 * 1024):
        data = bytes((i * 7 + size) % 256 for i in range(size))
        result = _encrypt(client, app_headers, "cards", data)
        assert result["key_id"] == key["id"] and result["key_version"] == 1
        text = result["ciphertext"]
        assert text.startswith(f"km:1:{key['id']}:1:")
        for ref in ("cards", key["id"], None):
            response = _decrypt(client, app_headers, text, ref)
            assert response.status_code == 200, response.text
            assert response.json() == {"plaintext": b64(data)}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_two_encryptions_of_one_plaintext_differ(
    client: TestClient, new_key: Callable[..., dict[str, Any]], app_headers: dict[str, str], algorithm: str
) -> None:
    new_key("cards", use_policy("billing"), algorithm)
    texts = {_encrypt(client, app_headers, "cards", CARD)["ciphertext"] for _ in range(4)}
    assert len(texts) == 4
    bodies = [unb64(text.rsplit(":", 1)[1]) for text in texts]
    assert len({body[:12] for body in bodies}) == 4
    assert all(CARD not in body for body in bodies)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_context(
    client: TestClient, new_key: Callable[..., dict[str, Any]], app_headers: dict[str, str], algorithm: str
) -> None:
    new_key("cards", use_policy("billing"), algorithm)
    context = {"table": "cards", "row": "17"}
    text = _encrypt(client, app_headers, "cards", CARD, context=context)["ciphertext"]
    # The context's order does not matter.
    reordered = {"row": "17", "table": "cards"}
    assert _decrypt(client, app_headers, text, "cards", context=reordered).json() == {"plaintext": b64(CARD)}
    wrong_contexts: list[dict[str, str] | None] = [
        None,
        {},
        {"table": "cards"},
        {"table": "cards", "row": "18"},
        {"table": "cards", "row": "17", "extra": ""},
        {"Table": "cards", "row": "17"},
    ]
    for wrong in wrong_contexts:
        extra = {} if wrong is None else {"context": wrong}
        for ref in ("cards", None):
            assert without_request_id(_decrypt(client, app_headers, text, ref, **extra)) == DECRYPTION_FAILED
    # No context at encryption: an empty context is the same as none, any other fails.
    plain = _encrypt(client, app_headers, "cards", CARD)["ciphertext"]
    assert _decrypt(client, app_headers, plain, "cards", context={}).status_code == 200
    bad = _decrypt(client, app_headers, plain, "cards", context={"a": "b"})
    assert without_request_id(bad) == DECRYPTION_FAILED


def _mutations(text: str) -> list[str]:
    """Every single-character change of the ciphertext string (one per position)."""
    out = []
    for index, char in enumerate(text):
        if char in HEX:
            replacement = HEX[(HEX.index(char) + 1) % 16]
        elif char in B64_ALPHABET:
            replacement = B64_ALPHABET[(B64_ALPHABET.index(char) + 1) % 64]
        elif char == "=":
            replacement = "A"
        else:
            replacement = "x"
        out.append(text[:index] + replacement + text[index + 1 :])
    return out


def _body_flips(text: str) -> list[str]:
    """Every single-byte change of the decoded body, re-encoded."""
    head, _, encoded = text.rpartition(":")
    body = base64.b64decode(encoded)
    out = []
    for index in range(len(body)):
        flipped = bytearray(body)
        flipped[index] ^= 0x01 if index % 2 else 0x80
        out.append(f"{head}:{b64(bytes(flipped))}")
    return out


def _reshaped(text: str, key_id: str, other_id: str) -> list[str]:
    """Truncated, extended and re-encoded spellings, and other key ids / versions."""
    head, _, encoded = text.rpartition(":")
    body = base64.b64decode(encoded)
    out = [text[:cut] for cut in range(0, len(text), 7)]
    out += [f"{head}:{b64(body[:cut])}" for cut in range(0, len(body), 3)]
    out += [
        text + "A",
        text + "AAAA",
        text + "====",
        text + " ",
        " " + text,
        text + "\n",
        f"{head}:{b64(body + b'x')}",
        f"{head}:{b64(body + bytes(16))}",
        f"{head}:{b64(body + body)}",
        f"{head}:{encoded.rstrip('=')}",
        f"{head}:{encoded[:8]}\n{encoded[8:]}",
        f"{head}:{encoded[:8]} {encoded[8:]}",
        f"{head}:{base64.urlsafe_b64encode(body).decode()}",
        f"{head}:{base64.b32encode(body).decode()}",
        f"{head}:{body.hex()}",
        f"{head}:{base64.encodebytes(body).decode()}",
        text.upper(),
        text.replace("km:1:", "km:2:", 1),
        text.replace("km:1:", "vault:v1:", 1),
        text.replace(f"{key_id}:1:", f"{key_id}:2:"),
        text.replace(f"{key_id}:1:", f"{key_id}:0:"),
        text.replace(f"{key_id}:1:", f"{key_id}:01:"),
        text.replace(key_id, new_id()),
        text.replace(key_id, other_id),
        text.replace(":", "::"),
        "",
        "km:1:",
        "not a ciphertext",
        "é" * 10,
    ]
    return [candidate for candidate in out if candidate != text]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_change_of_a_ciphertext_fails_identically(
    client: TestClient, new_key: Callable[..., dict[str, Any]], app_headers: dict[str, str], algorithm: str
) -> None:
    key = new_key("cards", use_policy("billing"), algorithm)
    other = new_key("other", use_policy("billing"), algorithm)
    context = {"table": "cards"}
    text = _encrypt(client, app_headers, "cards", bytes(range(16)), context=context)["ciphertext"]
    other_text = _encrypt(client, app_headers, "other", bytes(range(16)), context=context)["ciphertext"]

    candidates = _mutations(text) + _body_flips(text) + _reshaped(text, key["id"], other["id"])
    assert len(candidates) > 150
    answers = {}
    for candidate in candidates:
        answers[candidate] = without_request_id(_decrypt(client, app_headers, candidate, "cards", context=context))
    assert {repr(a) for a in answers.values()} == {repr(DECRYPTION_FAILED)}, [
        (c, a) for c, a in answers.items() if a != DECRYPTION_FAILED
    ][:5]

    # Through /v1/decrypt (key read from the ciphertext): the string mutations and flips.
    for candidate in _mutations(text) + _body_flips(text)[::3]:
        if other["id"] in candidate:
            continue  # a key id of another key the caller may use decrypts with that key (and fails the same)
        assert without_request_id(_decrypt(client, app_headers, candidate, context=context)) == DECRYPTION_FAILED

    # Another key's ciphertext, sent to this key; and this key's header spliced onto it.
    assert without_request_id(_decrypt(client, app_headers, other_text, "cards", context=context)) == DECRYPTION_FAILED
    spliced = other_text.replace(other["id"], key["id"])
    assert without_request_id(_decrypt(client, app_headers, spliced, "cards", context=context)) == DECRYPTION_FAILED
    assert without_request_id(_decrypt(client, app_headers, spliced, context=context)) == DECRYPTION_FAILED
    # The untouched ciphertexts still decrypt.
    assert _decrypt(client, app_headers, text, "cards", context=context).json() == {"plaintext": b64(bytes(range(16)))}
    assert _decrypt(client, app_headers, other_text, context=context).status_code == 200


def test_other_algorithms_ciphertext_fails_identically(
    client: TestClient, new_key: Callable[..., dict[str, Any]], app_headers: dict[str, str]
) -> None:
    cbc = new_key("cbc", use_policy("billing"), "AES_256_CBC_HMAC_SHA256")
    gcm = new_key("gcm", use_policy("billing"), "AES_256_GCM")
    cbc_text = _encrypt(client, app_headers, "cbc", CARD)["ciphertext"]
    gcm_text = _encrypt(client, app_headers, "gcm", CARD)["ciphertext"]
    for text, target, target_id, source_id in (
        (cbc_text, "gcm", gcm["id"], cbc["id"]),
        (gcm_text, "cbc", cbc["id"], gcm["id"]),
    ):
        assert without_request_id(_decrypt(client, app_headers, text, target)) == DECRYPTION_FAILED
        spliced = text.replace(source_id, target_id)
        assert without_request_id(_decrypt(client, app_headers, spliced, target)) == DECRYPTION_FAILED
        assert without_request_id(_decrypt(client, app_headers, spliced)) == DECRYPTION_FAILED


def test_unknown_key_id_via_decrypt(
    client: TestClient, new_key: Callable[..., dict[str, Any]], app_headers: dict[str, str]
) -> None:
    key = new_key("cards", use_policy("billing"))
    text = _encrypt(client, app_headers, "cards", CARD)["ciphertext"]
    unknown = text.replace(key["id"], new_id())
    assert without_request_id(_decrypt(client, app_headers, unknown)) == DECRYPTION_FAILED
    # Sent to a named key that does not exist, the key name in the path decides: 404.
    assert_error(_decrypt(client, app_headers, text, "no-such-key"), 404, "key_not_found")


def test_disabled_key_refuses_then_re_enabled_works(
    client: TestClient, new_key: Callable[..., dict[str, Any]], app_headers: dict[str, str], admin: dict[str, str]
) -> None:
    key = new_key("cards", use_policy("billing"))
    text = _encrypt(client, app_headers, "cards", CARD)["ciphertext"]

    response = client.patch("/v1/keys/cards", json={"enabled": False}, headers=admin)
    assert response.status_code == 200 and response.json()["state"] == "disabled"
    assert_error(
        client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=app_headers), 409, "key_disabled"
    )
    assert_error(_decrypt(client, app_headers, text, "cards"), 409, "key_disabled")
    assert_error(_decrypt(client, app_headers, text, key["id"]), 409, "key_disabled")
    assert_error(_decrypt(client, app_headers, text), 409, "key_disabled")
    assert client.get("/v1/keys/cards", headers=admin).json()["state"] == "disabled"

    response = client.patch(f"/v1/keys/{key['id']}", json={"enabled": True}, headers=admin)
    assert response.status_code == 200 and response.json()["state"] == "enabled"
    assert _decrypt(client, app_headers, text).json() == {"plaintext": b64(CARD)}
    again = _encrypt(client, app_headers, "cards", CARD)["ciphertext"]
    assert _decrypt(client, app_headers, again, "cards").json() == {"plaintext": b64(CARD)}


def test_hmac_key_does_not_encrypt(
    client: TestClient, new_key: Callable[..., dict[str, Any]], app_headers: dict[str, str]
) -> None:
    new_key("index", use_policy("billing"), "HMAC_SHA256")
    response = client.post("/v1/keys/index/encrypt", json={"plaintext": b64(CARD)}, headers=app_headers)
    assert_error(response, 400, "invalid_request")
