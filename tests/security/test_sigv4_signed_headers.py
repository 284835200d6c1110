"""SigV4 as AWS signs it (issue 20, item 3), against a real server over TLS.

The findings and their bounds: a captured admin ``DescribeKey`` signed without ``X-Amz-Target``
and re-sent as ``TrentService.DisableKey`` disabled the key (before: 200, key disabled; now: 400
``IncompleteSignatureException``, key still enabled); any ``x-amz-*`` header sent unsigned is
refused the same way; requests signed for ``kms.eu-west-1.amazonaws.com``, ``evil.example`` or
``127.0.0.1:1`` were accepted (before: 200; now: 400 ``InvalidSignatureException``). Requests
signed by botocore itself (boto3) pass unchanged.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from tests.security.conftest import Pair, Server

JSON_11 = "application/x-amz-json-1.1"
REGION = "eu-west-1"


def signed(
    pair: Pair, url: str, operation: str | None, params: dict[str, Any], **headers: str
) -> tuple[dict[str, str], bytes]:
    """Headers and body of a ``POST /`` signed by botocore for ``url`` (its host), with ``headers``;
    ``operation`` None: no ``X-Amz-Target`` while signing."""
    body = json.dumps(params).encode()
    signing = {"Content-Type": JSON_11, **headers}
    if operation is not None:
        signing["X-Amz-Target"] = f"TrentService.{operation}"
    request = AWSRequest(method="POST", url=url + "/", data=body, headers=signing)
    SigV4Auth(Credentials(pair.access_key_id, pair.secret_access_key), "kms", REGION).add_auth(request)
    sent = dict(request.headers.items())
    sent.setdefault("Host", urlsplit(url).netloc)
    return sent, body


def send(server: Server, headers: dict[str, str], body: bytes) -> httpx.Response:
    with server.client() as client:
        return client.post("/", content=body, headers=headers)


def refusal(answer: httpx.Response) -> str:
    assert answer.status_code == 400, answer.text
    return str(answer.json()["__type"])


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


def test_boto3_requests_pass_unchanged(admin_kms: Any) -> None:
    key = admin_kms.create_key(Description="boto3-signed")["KeyMetadata"]["KeyId"]
    blob = admin_kms.encrypt(KeyId=key, Plaintext=b"4111")["CiphertextBlob"]
    assert admin_kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b"4111"


def test_an_unsigned_target_cannot_turn_describe_into_disable(
    kms_door: Server, kms_admin: Pair, admin_kms: Any
) -> None:
    key = admin_kms.create_key(Description="target")["KeyMetadata"]["KeyId"]
    headers, body = signed(kms_admin, kms_door.url, None, {"KeyId": key})
    assert "x-amz-target" not in headers["Authorization"]
    headers["X-Amz-Target"] = "TrentService.DisableKey"
    assert refusal(send(kms_door, headers, body)) == "IncompleteSignatureException"
    assert admin_kms.describe_key(KeyId=key)["KeyMetadata"]["KeyState"] == "Enabled"


@pytest.mark.parametrize(
    "header", ["X-Amz-Content-SHA256", "X-Amz-Meta-Note", "X-Amz-Date-Extra"], ids=lambda h: h.lower()
)
def test_every_amz_header_present_must_be_signed(kms_door: Server, kms_admin: Pair, header: str) -> None:
    headers, body = signed(kms_admin, kms_door.url, "ListKeys", {})
    value = hashlib.sha256(body).hexdigest() if header == "X-Amz-Content-SHA256" else "x"
    headers[header] = value
    assert refusal(send(kms_door, headers, body)) == "IncompleteSignatureException"


def test_signed_amz_headers_are_accepted(kms_door: Server, kms_admin: Pair) -> None:
    headers, body = signed(
        kms_admin,
        kms_door.url,
        "ListKeys",
        {},
        **{"X-Amz-Content-SHA256": hashlib.sha256(b"{}").hexdigest()},
    )
    assert "x-amz-content-sha256" in headers["Authorization"]
    assert send(kms_door, headers, body).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "kms.eu-west-1.amazonaws.com", "127.0.0.1:1"])
def test_a_request_signed_for_another_host_is_refused(kms_door: Server, kms_admin: Pair, host: str) -> None:
    headers, body = signed(kms_admin, f"https://{host}", "ListKeys", {})
    assert headers["Host"] == host
    assert refusal(send(kms_door, headers, body)) == "InvalidSignatureException"


def test_the_certificate_names_with_the_port_are_this_service(kms_door: Server, kms_admin: Pair) -> None:
    port = urlsplit(kms_door.url).port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        headers, body = signed(kms_admin, f"https://{host}", "ListKeys", {})
        assert send(kms_door, headers, body).status_code == 200, host
