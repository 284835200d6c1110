"""The encryption context is bounded on every route (issue 20, item 6), against a real server over TLS.

The finding: REST accepted a 0.9 MB context (only the 1 MiB body bounded it) while AWS caps a
context at 8 KB. The bound: at most 8,192 bytes of canonical JSON (``domain/ciphertext.py``
``canonical_context``) on encrypt, decrypt, batches, data keys, re-encryption, MACs, streams and
the KMS door; one byte more is a 400 naming the limit (per item in a batch).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.security.conftest import Pair, Server

LIMIT = 8192
PLAINTEXT = base64.b64encode(b"4111").decode()
AT_LIMIT = {"k": "x" * (LIMIT - len('{"k":""}'))}
OVER = {"k": "x" * (LIMIT + 1 - len('{"k":""}'))}
HUGE = {"k": "x" * 900_000}


def canonical(context: dict[str, str]) -> bytes:
    return json.dumps(context, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_the_contexts_measure_what_they_say() -> None:
    assert (len(canonical(AT_LIMIT)), len(canonical(OVER))) == (LIMIT, LIMIT + 1)


@pytest.fixture(scope="module")
def app(kms_door: Server) -> Iterator[httpx.Client]:
    with kms_door.client(kms_door.admin_token) as admin:
        made = admin.post("/v1/principals", json={"name": "context-app", "role": "app"})
        assert made.status_code == 201, made.text
        every = ["context-app"]
        policy = {"encrypt": every, "decrypt": every, "generate_data_key": every, "reencrypt": every, "mac": every}
        for name, algorithm in (("context", "AES_256_GCM"), ("context-mac", "HMAC_SHA256")):
            key = {"name": name, "algorithm": algorithm, "policy": policy}
            assert admin.post("/v1/keys", json=key).status_code == 201
    with kms_door.client(made.json()["token"]) as client:
        yield client


def refused(answer: httpx.Response) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and str(LIMIT) in error["message"], error


def test_rest_routes_take_8192_bytes_and_refuse_one_more(app: httpx.Client) -> None:
    sealed = app.post("/v1/keys/context/encrypt", json={"plaintext": PLAINTEXT, "context": AT_LIMIT})
    assert sealed.status_code == 200, sealed.text
    ciphertext = sealed.json()["ciphertext"]
    opened = app.post("/v1/keys/context/decrypt", json={"ciphertext": ciphertext, "context": AT_LIMIT})
    assert opened.json()["plaintext"] == PLAINTEXT
    for context in (OVER, HUGE):
        refused(app.post("/v1/keys/context/encrypt", json={"plaintext": PLAINTEXT, "context": context}))
    refused(app.post("/v1/keys/context/decrypt", json={"ciphertext": ciphertext, "context": OVER}))
    refused(app.post("/v1/decrypt", json={"ciphertext": ciphertext, "context": OVER}))
    refused(app.post("/v1/keys/context/datakey", json={"context": OVER}))
    refused(app.post("/v1/keys/context/reencrypt", json={"ciphertext": ciphertext, "context": OVER}))
    refused(app.post("/v1/keys/context-mac/mac", json={"data": PLAINTEXT, "context": OVER}))
    mac = {"data": PLAINTEXT, "mac": PLAINTEXT, "context": OVER}
    refused(app.post("/v1/keys/context-mac/mac/verify", json=mac))


def test_a_batch_refuses_the_item_over_the_bound(app: httpx.Client) -> None:
    items = [{"plaintext": PLAINTEXT, "context": AT_LIMIT}, {"plaintext": PLAINTEXT, "context": OVER}]
    answer = app.post("/v1/keys/context/encrypt/batch", json={"items": items})
    assert answer.status_code == 200, answer.text
    first, second = answer.json()["results"]
    assert "ciphertext" in first
    assert second["error"]["code"] == "invalid_request" and str(LIMIT) in second["error"]["message"]


def test_a_stream_refuses_a_context_over_the_bound(app: httpx.Client) -> None:
    for context, status in ((AT_LIMIT, 200), (OVER, 400)):
        header = base64.b64encode(canonical(context)).decode()
        headers = {"Content-Type": "application/octet-stream", "X-KM-Context": header}
        answer = app.post("/v1/keys/context/encrypt/stream", content=b"x" * 100, headers=headers)
        assert answer.status_code == status, answer.text[:200]
    refused(answer)


@pytest.fixture(scope="module")
def admin_kms(kms_door: Server, kms_admin: Pair) -> Any:
    return boto3.client(
        "kms",
        endpoint_url=kms_door.url,
        region_name="eu-west-1",
        aws_access_key_id=kms_admin.access_key_id,
        aws_secret_access_key=kms_admin.secret_access_key,
        verify=str(kms_door.ca),
        config=Config(retries={"max_attempts": 1}),
    )


def test_the_kms_door_measures_the_same_bound(admin_kms: Any) -> None:
    key = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    blob = admin_kms.encrypt(KeyId=key, Plaintext=b"4111", EncryptionContext=AT_LIMIT)["CiphertextBlob"]
    assert admin_kms.decrypt(CiphertextBlob=blob, EncryptionContext=AT_LIMIT)["Plaintext"] == b"4111"
    many_small = {f"k{n:03d}": "v" for n in range(1000)}  # 5,000 bytes of keys and values, 11,001 canonical
    for context in (OVER, many_small):
        with pytest.raises(ClientError) as refusal:
            admin_kms.encrypt(KeyId=key, Plaintext=b"4111", EncryptionContext=context)
        assert refusal.value.response["Error"]["Code"] == "ValidationException"
        assert str(LIMIT) in refusal.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as refusal:
        admin_kms.generate_data_key(KeyId=key, KeySpec="AES_256", EncryptionContext=OVER)
    assert refusal.value.response["Error"]["Code"] == "ValidationException"
