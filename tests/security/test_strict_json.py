"""Duplicate JSON keys, at any depth, on every door (issue 20, item 5), against a real server over TLS.

The finding: ``json.loads`` keeps the last of two equal keys, so a PutKeyPolicy statement with
``"Effect": "Deny"`` then ``"Effect": "Allow"`` was stored as Allow (before: 200, stored; now:
``MalformedPolicyDocumentException``, nothing stored). The bound: every request body — native REST
through FastAPI and through the fast path, the X-KM-Context of streams, the KMS door, policy
documents — with an object naming a key twice is refused with a 400 naming the key
(``invalid_request`` natively, ``SerializationException`` on the KMS door) and changes nothing.
"""

from __future__ import annotations

import base64
import importlib
import json
import pkgutil
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from fastapi import APIRouter
from fastapi.routing import APIRoute

from keymanager.api import routes as routes_package
from keymanager.api.json_bodies import StrictJsonRoute
from tests.security.conftest import Pair, Server

REGION = "eu-west-1"
ACCOUNT = "111122223333"
PLAINTEXT = base64.b64encode(b"4111").decode()


@pytest.fixture(scope="module")
def admin(kms_door: Server) -> Iterator[httpx.Client]:
    with kms_door.client(kms_door.admin_token) as client:
        yield client


@pytest.fixture(scope="module")
def app_token(admin: httpx.Client) -> str:
    made = admin.post("/v1/principals", json={"name": "strict-app", "role": "app"})
    assert made.status_code == 201, made.text
    policy = {"encrypt": ["strict-app"], "decrypt": ["strict-app"], "generate_data_key": ["strict-app"]}
    assert admin.post("/v1/keys", json={"name": "strict", "policy": policy}).status_code == 201
    return str(made.json()["token"])


def refused_natively(answer: httpx.Response, key: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and f"'{key}' twice" in error["message"], error


def post_raw(client: httpx.Client, path: str, body: str, **headers: str) -> httpx.Response:
    return client.post(path, content=body.encode(), headers={"Content-Type": "application/json", **headers})


def test_rest_admin_routes_refuse_duplicate_keys_and_change_nothing(admin: httpx.Client, app_token: str) -> None:
    refused_natively(post_raw(admin, "/v1/keys", '{"name": "dup-a", "name": "dup-b", "policy": {}}'), "name")
    assert admin.get("/v1/keys/dup-a").status_code == admin.get("/v1/keys/dup-b").status_code == 404
    before = admin.get("/v1/keys/strict").json()["policy"]
    deep = '{"policy": {"encrypt": ["strict-app"], "decrypt": [], "decrypt": ["strict-app"]}}'
    patched = admin.patch("/v1/keys/strict", content=deep, headers={"Content-Type": "application/json"})
    refused_natively(patched, "decrypt")
    assert admin.get("/v1/keys/strict").json()["policy"] == before


def test_hot_routes_refuse_duplicate_keys(kms_door: Server, app_token: str) -> None:
    with kms_door.client(app_token) as app:
        assert post_raw(app, "/v1/keys/strict/encrypt", json.dumps({"plaintext": PLAINTEXT})).status_code == 200
        twice = f'{{"plaintext": "{PLAINTEXT}", "plaintext": "{PLAINTEXT}"}}'
        refused_natively(post_raw(app, "/v1/keys/strict/encrypt", twice), "plaintext")
        context = f'{{"plaintext": "{PLAINTEXT}", "context": {{"tenant": "a", "tenant": "b"}}}}'
        refused_natively(post_raw(app, "/v1/keys/strict/encrypt", context), "tenant")
        in_a_list = f'{{"items": [{{"plaintext": "{PLAINTEXT}"}}, {{"plaintext": "{PLAINTEXT}", "plaintext": ""}}]}}'
        refused_natively(post_raw(app, "/v1/keys/strict/encrypt/batch", in_a_list), "plaintext")
        refused_natively(post_raw(app, "/v1/keys/strict/datakey", '{"bits": 256, "bits": 128}'), "bits")


def test_a_stream_context_with_duplicate_keys_is_refused(kms_door: Server, app_token: str) -> None:
    header = base64.b64encode(b'{"tenant": "a", "tenant": "b"}').decode()
    with kms_door.client(app_token) as app:
        answer = app.post(
            "/v1/keys/strict/encrypt/stream",
            content=b"x" * 100,
            headers={"Content-Type": "application/octet-stream", "X-KM-Context": header},
        )
    refused_natively(answer, "tenant")


def test_every_router_of_the_native_api_decodes_strictly() -> None:
    routers = [
        value
        for info in pkgutil.iter_modules(routes_package.__path__)
        for value in vars(importlib.import_module(f"{routes_package.__name__}.{info.name}")).values()
        if isinstance(value, APIRouter)
    ]
    assert len(routers) >= 10
    for router in routers:
        assert router.route_class is StrictJsonRoute, router.prefix
        assert all(isinstance(route, StrictJsonRoute) for route in router.routes if isinstance(route, APIRoute))


def kms_raw(server: Server, pair: Pair, operation: str, body: bytes) -> httpx.Response:
    request = AWSRequest(
        method="POST",
        url=server.url + "/",
        data=body,
        headers={"X-Amz-Target": f"TrentService.{operation}", "Content-Type": "application/x-amz-json-1.1"},
    )
    SigV4Auth(Credentials(pair.access_key_id, pair.secret_access_key), "kms", REGION).add_auth(request)
    with server.client() as client:
        return client.post("/", content=body, headers=dict(request.headers.items()))


@pytest.fixture(scope="module")
def admin_kms(kms_door: Server, kms_admin: Pair) -> Any:
    return boto3.client(
        "kms",
        endpoint_url=kms_door.url,
        region_name=REGION,
        aws_access_key_id=kms_admin.access_key_id,
        aws_secret_access_key=kms_admin.secret_access_key,
        verify=str(kms_door.ca),
        config=Config(retries={"max_attempts": 1}),
    )


def test_the_kms_door_refuses_duplicate_keys(kms_door: Server, kms_admin: Pair, admin_kms: Any) -> None:
    first = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    second = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    body = f'{{"KeyId": "{first}", "Plaintext": "{PLAINTEXT}", "KeyId": "{second}"}}'.encode()
    answer = kms_raw(kms_door, kms_admin, "Encrypt", body)
    assert answer.status_code == 400 and answer.json()["__type"] == "SerializationException", answer.text
    assert "'KeyId' twice" in answer.json()["message"]
    deep = f'{{"KeyId": "{first}", "Tags": [{{"TagKey": "a", "TagValue": "1", "TagKey": "b"}}]}}'.encode()
    answer = kms_raw(kms_door, kms_admin, "TagResource", deep)
    assert answer.json()["__type"] == "SerializationException", answer.text
    assert admin_kms.list_resource_tags(KeyId=first)["Tags"] == []


def test_a_policy_statement_naming_effect_twice_is_malformed(kms_door: Server, admin_kms: Any) -> None:
    key = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    shown = admin_kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"]
    principal = f"arn:aws:iam::{ACCOUNT}:user/security-admin"
    policy = (
        '{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Effect": "Allow", '
        f'"Principal": {{"AWS": ["{principal}"]}}, "Action": ["kms:Encrypt", "kms:ReEncryptTo"], "Resource": "*"}}]}}'
    )
    with pytest.raises(ClientError) as refused:
        admin_kms.put_key_policy(KeyId=key, PolicyName="default", Policy=policy)
    assert refused.value.response["Error"]["Code"] == "MalformedPolicyDocumentException"
    assert "'Effect' twice" in refused.value.response["Error"]["Message"]
    assert admin_kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"] == shown


# -- issue 41, item 6: nesting, NaN, and the KMS door's signature before any decoding ----------------
DEEP = "[" * 30_000 + "]" * 30_000
"""30,000 levels: ``RecursionError`` (500) in ``json.loads`` before."""


def deep_field(levels: int) -> str:
    return "[" * levels + "]" * levels


def refused_as_invalid(answer: httpx.Response, words: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and words in error["message"], error


def test_rest_refuses_nesting_deeper_than_64_through_fastapi_and_the_fast_path(
    admin: httpx.Client, kms_door: Server, app_token: str
) -> None:
    too_deep = f'{{"name": "deep-key", "policy": {{}}, "description": {deep_field(65)}}}'
    refused_as_invalid(post_raw(admin, "/v1/keys", too_deep), "nested deeper than 64")
    refused_as_invalid(post_raw(admin, "/v1/keys", DEEP), "nested deeper than 64")
    assert admin.get("/v1/keys/deep-key").status_code == 404
    with kms_door.client(app_token) as app:
        context = f'{{"plaintext": "{PLAINTEXT}", "context": {{"a": {deep_field(64)}}}}}'
        refused_as_invalid(post_raw(app, "/v1/keys/strict/encrypt", context), "nested deeper than 64")
        refused_as_invalid(post_raw(app, "/v1/keys/strict/encrypt", DEEP), "nested deeper than 64")
        batch = f'{{"items": [{{"plaintext": "{PLAINTEXT}", "context": {{"a": {deep_field(62)}}}}}]}}'
        refused_as_invalid(post_raw(app, "/v1/keys/strict/encrypt/batch", batch), "nested deeper than 64")
        shallow = f'{{"plaintext": "{PLAINTEXT}", "context": {{"a": "{"[" * 100}"}}}}'  # brackets in a string
        assert post_raw(app, "/v1/keys/strict/encrypt", shallow).status_code == 200


def test_rest_refuses_non_finite_numbers(admin: httpx.Client, kms_door: Server, app_token: str) -> None:
    refused_as_invalid(post_raw(admin, "/v1/keys", '{"name": "nan-key", "policy": {}, "x": NaN}'), "NaN")
    with kms_door.client(app_token) as app:
        refused_as_invalid(post_raw(app, "/v1/keys/strict/datakey", '{"bits": Infinity}'), "Infinity")


def test_the_kms_door_refuses_deep_and_non_finite_bodies_it_was_signed_for(
    kms_door: Server, kms_admin: Pair, admin_kms: Any
) -> None:
    for body, code in ((DEEP, "ValidationException"), ('{"KeyId": "x", "Limit": NaN}', "SerializationException")):
        answer = kms_raw(kms_door, kms_admin, "DescribeKey", body.encode())
        assert answer.status_code == 400 and answer.json()["__type"] == code, answer.text
    assert "nested deeper than 64" in kms_raw(kms_door, kms_admin, "ListKeys", DEEP.encode()).json()["message"]


def unsigned(server: Server, body: bytes) -> httpx.Response:
    headers = {"X-Amz-Target": "TrentService.Encrypt", "Content-Type": "application/x-amz-json-1.1"}
    with server.client() as client:
        return client.post("/", content=body, headers=headers)


def test_the_kms_door_checks_the_signature_before_it_reads_any_json(kms_door: Server) -> None:
    """An unsigned stranger's body is never decoded: it is refused for its missing signature, whatever
    it holds, and writes no ERROR line (one per request before, for a body too deep to decode)."""
    log_before = kms_door.log.read_text()
    for body in (DEEP.encode(), b"{not json", b'{"KeyId": "a", "KeyId": "b"}'):
        answer = unsigned(kms_door, body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["__type"] == "MissingAuthenticationTokenException", answer.text
    written = kms_door.log.read_text()[len(log_before) :]
    assert " ERROR " not in written and "RecursionError" not in written, written[-2000:]
