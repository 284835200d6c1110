"""Known-answer vectors of the ``km:1`` ciphertext format, in both algorithms.

The vectors (``km1_vectors.json``) were computed in software from the format's description, with
test keys whose values are known. Here the same key values are created directly in the test token
(sensitive, never extractable, as a key version's objects), and:

* the HSM's encryption with the vector's IV or nonce gives the vector's string byte for byte;
* the HSM decrypts every vector;
* an independent decoder (``ciphertext_reference``, from the description alone) decrypts every
  vector, and ciphertexts the service makes with its own random IVs through the API.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pkcs11 import Attribute, KeyType

from keymanager.domain import ciphertext as ct
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.errors import DecryptionFailed
from keymanager.hsm import AES_TEMPLATE, HMAC_TEMPLATE, Hsm
from keymanager.services.container import Services
from tests.conftest import auth
from tests.hsm import ciphertext_reference as reference

VECTORS = json.loads((Path(__file__).parent / "km1_vectors.json").read_text(encoding="utf-8"))
AES_KEY = bytes.fromhex(VECTORS["aes_key_hex"])
HMAC_KEY = bytes.fromhex(VECTORS["hmac_key_hex"])


def _create_known(hsm: Hsm, objects: HsmObjects) -> None:
    """Create the version's objects in the token with the vectors' key values."""

    def create(token: Any) -> None:
        session = token.session()
        if objects.enc_label is not None:
            session.create_object(
                {
                    **AES_TEMPLATE,
                    Attribute.KEY_TYPE: KeyType.AES,
                    Attribute.VALUE: AES_KEY,
                    Attribute.LABEL: objects.enc_label,
                }
            )
        if objects.mac_label is not None:
            session.create_object(
                {
                    **HMAC_TEMPLATE,
                    Attribute.KEY_TYPE: KeyType.GENERIC_SECRET,
                    Attribute.VALUE: HMAC_KEY,
                    Attribute.LABEL: objects.mac_label,
                }
            )

    hsm.call(create)


@pytest.fixture
def known_objects(hsm: Hsm) -> Iterator[dict[str, HsmObjects]]:
    """Objects with the vectors' key values, per algorithm (labels outside the ``km/`` namespace)."""
    base = f"kat/{new_id()}"
    made = {
        "AES_256_CBC_HMAC_SHA256": HsmObjects(enc_label=f"{base}/aes", mac_label=f"{base}/hmac"),
        "AES_256_GCM": HsmObjects(enc_label=f"{base}/aes", mac_label=None),
    }
    _create_known(hsm, made["AES_256_CBC_HMAC_SHA256"])
    yield made
    hsm.destroy_version(made["AES_256_CBC_HMAC_SHA256"])


def _ids(vector: dict[str, Any]) -> str:
    return f"{vector['algorithm']}-v{vector['key_version']}"


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=_ids)
def test_the_hsm_gives_each_vector_byte_for_byte_and_decrypts_it(
    hsm: Hsm, known_objects: dict[str, HsmObjects], vector: dict[str, Any]
) -> None:
    algorithm = Algorithm(vector["algorithm"])
    objects = known_objects[vector["algorithm"]]
    head = ct.header(vector["key_id"], vector["key_version"])
    plaintext = bytes.fromhex(vector["plaintext_hex"])
    iv = bytes.fromhex(vector["iv_hex"])
    context = ct.canonical_context(vector["context"])

    body = asyncio.run(hsm.aencrypt(objects, algorithm, head, plaintext, context, iv_source=lambda n: iv[:n]))

    assert ct.Ciphertext(vector["key_id"], vector["key_version"], body).encode() == vector["ciphertext"]
    parsed = ct.parse(vector["ciphertext"])
    assert asyncio.run(hsm.adecrypt(objects, algorithm, parsed.header, parsed.body, context)) == plaintext


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=_ids)
def test_the_reference_decoder_decrypts_each_vector_and_refuses_a_changed_one(vector: dict[str, Any]) -> None:
    hmac_key = HMAC_KEY if vector["algorithm"] == "AES_256_CBC_HMAC_SHA256" else None
    text = vector["ciphertext"]
    plaintext = reference.decrypt(text, vector["algorithm"], AES_KEY, hmac_key, vector["context"])
    assert plaintext == bytes.fromhex(vector["plaintext_hex"])
    assert reference.split(text)[:2] == (vector["key_id"], vector["key_version"])
    other_version = text.replace(f":{vector['key_version']}:", f":{vector['key_version'] + 1}:", 1)
    with pytest.raises(reference.Refused):
        reference.decrypt(other_version, vector["algorithm"], AES_KEY, hmac_key, vector["context"])
    with pytest.raises(reference.Refused):
        reference.decrypt(text, vector["algorithm"], AES_KEY, hmac_key, {"other": "context"})


@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM"])
def test_the_reference_decoder_opens_the_service_s_fresh_ciphertexts(
    client: TestClient, services: Services, hsm: Hsm, admin_token: str, algorithm: str
) -> None:
    """A key made through the API whose version's objects are replaced by ones with known values:
    what the service encrypts (its own IVs) the reference decodes, and the reverse round trip holds."""
    admin = auth(admin_token)
    body = {"name": "vectors", "algorithm": algorithm, "policy": {"encrypt": ["admin"], "decrypt": ["admin"]}}
    assert client.post("/v1/keys", json=body, headers=admin).status_code == 201
    key = services.keys.find("vectors")
    objects = key.versions[1].hsm
    hsm.destroy_version(objects)
    _create_known(hsm, objects)
    try:
        for context in (None, {"tenant": "acme", "ünï": "cödé"}):
            plaintext = "4111 1111 1111 1111 — Grüße".encode()
            request = {"plaintext": base64.b64encode(plaintext).decode(), "context": context}
            texts = [
                client.post("/v1/keys/vectors/encrypt", json=request, headers=admin).json()["ciphertext"]
                for _ in range(2)
            ]
            assert texts[0] != texts[1]  # fresh IVs
            hmac_key = HMAC_KEY if algorithm == "AES_256_CBC_HMAC_SHA256" else None
            for text in texts:
                assert reference.split(text)[:2] == (key.id, 1)
                assert reference.decrypt(text, algorithm, AES_KEY, hmac_key, context) == plaintext
                response = client.post("/v1/decrypt", json={"ciphertext": text, "context": context}, headers=admin)
                assert base64.b64decode(response.json()["plaintext"]) == plaintext
    finally:
        hsm.destroy_version(objects)


@pytest.mark.parametrize("size", [64 * 1024 - 17, 64 * 1024, 300_001])
def test_large_ciphertexts_match_the_reference(hsm: Hsm, known_objects: dict[str, HsmObjects], size: int) -> None:
    """Large ciphertexts (stream segments' sizes) are the format's (the reference opens them), the HSM
    opens them, and a changed byte still fails."""
    objects = known_objects["AES_256_CBC_HMAC_SHA256"]
    key_id, algorithm, context = new_id(), Algorithm.AES_256_CBC_HMAC_SHA256, {"tenant": "acme"}
    head, encoded = ct.header(key_id, 1), ct.canonical_context(context)
    plaintext = os.urandom(size)
    body = asyncio.run(hsm.aencrypt(objects, algorithm, head, plaintext, encoded))
    text = ct.Ciphertext(key_id, 1, body).encode()
    assert reference.decrypt(text, algorithm.value, AES_KEY, HMAC_KEY, context) == plaintext
    assert asyncio.run(hsm.adecrypt(objects, algorithm, head, body, encoded)) == plaintext
    for where in (ct.IV_BYTES + size // 2, len(body) - ct.MAC_BYTES - 1, len(body) - 1):
        changed = bytearray(body)
        changed[where] ^= 1
        with pytest.raises(DecryptionFailed):
            asyncio.run(hsm.adecrypt(objects, algorithm, head, bytes(changed), encoded))
