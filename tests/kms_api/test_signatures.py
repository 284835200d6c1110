"""What a client that signs wrongly, or sends a tampered blob, gets: each the AWS error it expects.

Raw requests are signed with botocore's own ``SigV4Auth`` (a fixed clock where the test needs
one) and sent with httpx, so the server sees exactly what an AWS SDK would send.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from unittest import mock

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.e2e.conftest import Server
from tests.kms_api.conftest import REGION, KmsFactory, Pair

JSON_11 = "application/x-amz-json-1.1"


def signed(
    server: Server,
    pair: Pair,
    operation: str,
    body: bytes,
    *,
    secret: str | None = None,
    at: dt.datetime | None = None,
    service: str = "kms",
    headers: dict[str, str] | None = None,
) -> AWSRequest:
    """A POST / for ``operation`` signed by botocore (with ``at`` as the clock when given)."""
    request = AWSRequest(
        method="POST",
        url=server.url + "/",
        data=body,
        headers={"X-Amz-Target": f"TrentService.{operation}", "Content-Type": JSON_11, **(headers or {})},
    )
    credentials = Credentials(pair.access_key_id, secret or pair.secret_access_key)
    if at is None:
        SigV4Auth(credentials, service, REGION).add_auth(request)
    else:
        with mock.patch("botocore.auth.get_current_datetime", return_value=at.replace(tzinfo=None)):
            SigV4Auth(credentials, service, REGION).add_auth(request)
    return request


def send(server: Server, request: AWSRequest, body: bytes | None = None) -> httpx.Response:
    with server.client() as client:
        return client.post("/", content=request.body if body is None else body, headers=dict(request.headers.items()))


def aws_error(answer: httpx.Response) -> str:
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == JSON_11
    assert answer.headers["x-amzn-requestid"]
    assert "Traceback" not in answer.text
    return str(answer.json()["__type"])


@pytest.fixture(scope="module")
def sealed(admin_kms: Any) -> dict[str, Any]:
    key = admin_kms.create_key()["KeyMetadata"]
    blob = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"card 4111")["CiphertextBlob"]
    return {"key": key, "blob": blob}


def test_a_correct_raw_request_is_answered(kms_server: Server, admin_pair: Pair) -> None:
    answer = send(kms_server, signed(kms_server, admin_pair, "GenerateRandom", b'{"NumberOfBytes": 8}'))
    assert answer.status_code == 200 and answer.headers["x-amzn-requestid"]
    assert len(base64.b64decode(answer.json()["Plaintext"])) == 8


def test_wrong_secret(kms_client: KmsFactory, admin_pair: Pair) -> None:
    wrong = Pair(admin_pair.principal, admin_pair.access_key_id, "w" * 40)
    with pytest.raises(ClientError) as refused:
        kms_client(wrong).list_keys()
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert "w" * 40 not in str(refused.value.response)


def test_unknown_access_key(kms_client: KmsFactory) -> None:
    with pytest.raises(ClientError) as refused:
        kms_client(Pair("nobody", "KMAKAAAAAAAAAAAAAAAA", "s" * 40)).list_keys()
    assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"


@pytest.mark.parametrize("minutes", [-20, 20])
def test_signature_outside_15_minutes(kms_server: Server, admin_pair: Pair, minutes: int) -> None:
    at = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=minutes)
    request = signed(kms_server, admin_pair, "GenerateRandom", b'{"NumberOfBytes": 8}', at=at)
    assert request.headers["X-Amz-Date"] == at.strftime("%Y%m%dT%H%M%SZ")
    answer = send(kms_server, request)
    assert aws_error(answer) == "InvalidSignatureException"


def test_signature_10_minutes_old_is_accepted(kms_server: Server, admin_pair: Pair) -> None:
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)
    answer = send(kms_server, signed(kms_server, admin_pair, "GenerateRandom", b'{"NumberOfBytes": 8}', at=at))
    assert answer.status_code == 200


def test_signature_over_another_body(kms_server: Server, admin_pair: Pair) -> None:
    request = signed(kms_server, admin_pair, "GenerateRandom", b'{"NumberOfBytes": 8}')
    answer = send(kms_server, request, b'{"NumberOfBytes": 9}')
    assert aws_error(answer) == "InvalidSignatureException"


def test_signature_for_another_service(kms_server: Server, admin_pair: Pair) -> None:
    answer = send(kms_server, signed(kms_server, admin_pair, "GenerateRandom", b"{}", service="s3"))
    assert aws_error(answer) == "InvalidSignatureException"


def test_session_tokens_are_refused(kms_server: Server, admin_pair: Pair) -> None:
    request = signed(kms_server, admin_pair, "ListKeys", b"{}", headers={"X-Amz-Security-Token": "t"})
    assert aws_error(send(kms_server, request)) == "UnrecognizedClientException"


def test_missing_and_malformed_authentication(kms_server: Server) -> None:
    with kms_server.client() as client:
        headers = {"X-Amz-Target": "TrentService.ListKeys", "Content-Type": JSON_11}
        assert aws_error(client.post("/", content=b"{}", headers=headers)) == "MissingAuthenticationTokenException"
        headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=nonsense"
        assert aws_error(client.post("/", content=b"{}", headers=headers)) == "IncompleteSignatureException"


def test_unknown_or_missing_target(kms_server: Server, admin_pair: Pair) -> None:
    answer = send(kms_server, signed(kms_server, admin_pair, "MakeCoffee", b"{}"))
    assert aws_error(answer) == "UnknownOperationException"
    with kms_server.client() as client:
        assert (
            aws_error(client.post("/", content=b"{}", headers={"Content-Type": JSON_11})) == "UnknownOperationException"
        )


def test_malformed_bodies(kms_server: Server, admin_pair: Pair) -> None:
    for body in (b"{not json", b"[1, 2]", b'{"NumberOfBytes": "eight"}'):
        answer = send(kms_server, signed(kms_server, admin_pair, "GenerateRandom", body))
        assert aws_error(answer) == "SerializationException", body
    answer = send(kms_server, signed(kms_server, admin_pair, "Encrypt", b'{"Plaintext": "AA=="}'))
    assert aws_error(answer) == "ValidationException"


def test_body_over_64_kib_is_refused_before_parsing(kms_server: Server, admin_pair: Pair) -> None:
    body = b'{"Plaintext": "' + b"A" * (64 * 1024) + b'"}'
    answer = send(kms_server, signed(kms_server, admin_pair, "Encrypt", body))
    assert aws_error(answer) == "ValidationException" and "64" not in answer.json().get("Plaintext", "")


def test_a_chunked_body_over_64_kib_is_refused_while_read(kms_server: Server, admin_pair: Pair) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"Plaintext": "'
        for _ in range(80):
            yield b"A" * 1024
        yield b'"}'

    request = signed(kms_server, admin_pair, "Encrypt", b"{}")
    headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
    with kms_server.client() as client:
        answer = client.post("/", content=chunks(), headers=headers)
    assert aws_error(answer) == "ValidationException"


def test_every_byte_of_a_blob_changed_gives_one_answer(admin_kms: Any, sealed: dict[str, Any]) -> None:
    blob: bytes = sealed["blob"]
    answers = set()
    for index in [0, 1, 2, 3, 5, 19, 21, 23, 24, 30, len(blob) - 1]:
        tampered = bytearray(blob)
        tampered[index] ^= 0x01
        with pytest.raises(ClientError) as refused:
            admin_kms.decrypt(CiphertextBlob=bytes(tampered))
        error = refused.value.response["Error"]
        answers.add((error["Code"], error["Message"], refused.value.response["ResponseMetadata"]["HTTPStatusCode"]))
    for short in (blob[:10], blob[:-1], blob + b"\x00"):
        with pytest.raises(ClientError) as refused:
            admin_kms.decrypt(CiphertextBlob=short)
        error = refused.value.response["Error"]
        answers.add((error["Code"], error["Message"], refused.value.response["ResponseMetadata"]["HTTPStatusCode"]))
    assert answers == {("InvalidCiphertextException", "Unable to decrypt the ciphertext", 400)}


def test_a_blob_of_another_key(admin_kms: Any, sealed: dict[str, Any]) -> None:
    other = admin_kms.create_key()["KeyMetadata"]
    with pytest.raises(ClientError) as refused:
        admin_kms.decrypt(CiphertextBlob=sealed["blob"], KeyId=other["KeyId"])
    assert refused.value.response["Error"]["Code"] == "IncorrectKeyException"
    # moved to the other key's id in the header: authentication fails, the uniform answer
    moved = sealed["blob"][:4] + bytes.fromhex(other["KeyId"]) + sealed["blob"][20:]
    with pytest.raises(ClientError) as refused:
        admin_kms.decrypt(CiphertextBlob=moved)
    assert refused.value.response["Error"]["Code"] == "InvalidCiphertextException"


def test_aws_endpoint_url_kms_environment_variable(
    kms_server: Server, admin_pair: Pair, sealed: dict[str, Any]
) -> None:
    """An unmodified program (no endpoint in its code) reaches us through ``AWS_ENDPOINT_URL_KMS``."""
    program = (
        "import boto3, sys\n"
        "kms = boto3.client('kms')\n"
        "blob = kms.encrypt(KeyId=sys.argv[1], Plaintext=b'from env')['CiphertextBlob']\n"
        "print(kms.decrypt(CiphertextBlob=blob)['Plaintext'].decode())\n"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "AWS_ENDPOINT_URL_KMS": kms_server.url,
        "AWS_CA_BUNDLE": str(kms_server.ca),
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": admin_pair.access_key_id,
        "AWS_SECRET_ACCESS_KEY": admin_pair.secret_access_key,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    done = subprocess.run(
        [sys.executable, "-c", program, sealed["key"]["KeyId"]], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from env"


def test_refusals_are_audited_and_counted(kms_server: Server, admin_pair: Pair, admin_kms: Any) -> None:
    """An authenticated refusal has its own record; one refused before the caller authenticated
    (an unknown operation, a wrong secret) is counted and summarised per address, never recorded
    one by one (tests/kms_api/test_throttle.py bounds it)."""
    send(kms_server, signed(kms_server, admin_pair, "MakeCoffee", b"{}"))
    send(kms_server, signed(kms_server, admin_pair, "GenerateRandom", b'{"NumberOfBytes": 8}', secret="x" * 40))
    with pytest.raises(ClientError):
        admin_kms.generate_random(NumberOfBytes=100_000)  # authenticated, then refused
    with kms_server.client(kms_server.admin_token) as admin:
        records = admin.get("/v1/audit", params={"limit": 1000}).json()
        metrics = admin.get("/metrics").text
    records = records["records"] if isinstance(records, dict) else records
    actions = {(r["action"], r["status"]) for r in records}
    assert ("kms.GenerateRandom", 400) in actions
    assert not any(action == "kms.unknown" for action, _ in actions)
    assert any(action == "auth.failed" for action, _ in actions)
    assert "km_auth_failures_total" in metrics
    assert ("kms.GenerateRandom", 200) in actions
    assert 'route="kms.GenerateRandom"' in metrics
    assert json.dumps(records).count("x" * 40) == 0
