"""The XKS door in process, on SQLite and PostgreSQL: a round trip with its audit records in the chain, a
policy change seen at once through the cache, and a flood of unauthenticated calls that stays bounded.

(Signers and refusals over real TLS: ``tests/xks/``.)"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.domain.audit import AuditQuery
from keymanager.domain.models import Role
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from tests.conftest import auth, make_settings
from tests.support.postgres import create_database, drop_database

BURST = 3
BASE = "https://testserver"
PREFIX = "keystores/in-process"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def services(request: pytest.FixtureRequest, tmp_path: Path, hsm: Hsm) -> Iterator[Services]:
    if request.param == "sqlite":  # a copy of the process's migrated template, on either backend
        url = None
        (tmp_path / "var").mkdir(mode=0o700)
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), tmp_path / "var" / "keymanager.db")
    else:
        url = create_database(template=request.getfixturevalue("postgres_template"))
    settings = make_settings(
        tmp_path / "var",
        url,
        auth_failure_burst=BURST,
        auth_failures_per_second=0.01,
        public_hosts=["testserver"],  # the in-process client's Host, which the requests are signed for
    )
    built = Services.build(settings, hsm=hsm)
    try:
        yield built
    finally:
        built.close()
        if url is not None:
            drop_database(url)


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services=services), base_url=BASE) as test_client:
        yield test_client


@pytest.fixture
def store(client: TestClient, services: Services) -> tuple[str, str]:
    """A key store with an access key, and a key it may use: the access key id and secret."""
    admin = auth(services.principals.create("admin", Role.ADMIN).token)
    body = {"name": "aws", "role": "xks", "xks_uri_prefix": PREFIX}
    assert client.post("/v1/principals", json=body, headers=admin).status_code == 201
    pair = client.post("/v1/principals/aws/access-keys", json={}, headers=admin).json()
    policy = {"encrypt": ["aws"], "decrypt": ["aws"]}
    key = {"name": "k", "algorithm": "AES_256_GCM", "policy": policy}
    assert client.post("/v1/keys", json=key, headers=admin).status_code == 201
    return pair["access_key_id"], pair["secret_access_key"]


def call(client: TestClient, pair: tuple[str, str] | None, path: str, body: dict[str, Any] | bytes) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = AWSRequest(method="POST", url=BASE + path, data=data, headers={"Content-Type": "application/json"})
    if pair is not None:
        SigV4Auth(Credentials(*pair), "kms-xks-proxy", "eu-west-1").add_auth(request)
    answer = client.post(path, content=data, headers=dict(request.headers.items()))
    return answer.status_code, answer.json()


def meta(operation: str) -> dict[str, str]:
    return {"awsPrincipalArn": "arn:aws:iam::1:root", "kmsKeyArn": "a", "kmsOperation": operation, "kmsRequestId": "r"}


def test_round_trip_with_its_audit_records(client: TestClient, services: Services, store: tuple[str, str]) -> None:
    plaintext = base64.b64encode(b"data key").decode()
    body = {"requestMetadata": meta("Encrypt"), "plaintext": plaintext, "encryptionAlgorithm": "AES_GCM"}
    status, sealed = call(client, store, f"/{PREFIX}/kms/xks/v1/keys/k/encrypt", body)
    assert status == 200, sealed
    opened = {"requestMetadata": meta("Decrypt"), "encryptionAlgorithm": "AES_GCM", **sealed}
    assert call(client, store, f"/{PREFIX}/kms/xks/v1/keys/k/decrypt", opened) == (200, {"plaintext": plaintext})
    records = services.audit_records.query(AuditQuery(principal="aws"))
    assert [r.entry.action for r in records][-2:] == ["xks.Encrypt", "xks.Decrypt"]
    assert all(r.entry.details["kmsRequestId"] == "r" for r in records[-2:])
    assert services.audit_reader.verify().ok


def test_a_policy_change_is_seen_at_once(client: TestClient, services: Services, store: tuple[str, str]) -> None:
    path = f"/{PREFIX}/kms/xks/v1/keys/k/metadata"
    assert call(client, store, path, {"requestMetadata": meta("DescribeKey")})[1]["keyUsage"] == ["ENCRYPT", "DECRYPT"]
    admin = auth(services.principals.create("admin2", Role.ADMIN).token)
    assert client.patch("/v1/keys/k", json={"policy": {"mac": []}}, headers=admin).status_code == 200
    status, refused = call(client, store, path, {"requestMetadata": meta("DescribeKey")})
    assert (status, refused["errorName"]) == (404, "KeyNotFoundException")
    # Named again: the cached key (which does not name the store) is read afresh, not believed.
    assert client.patch("/v1/keys/k", json={"policy": {"encrypt": ["aws"]}}, headers=admin).status_code == 200
    assert call(client, store, path, {"requestMetadata": meta("DescribeKey")}) == (
        200,
        {"keySpec": "AES_256", "keyUsage": ["ENCRYPT"], "keyStatus": "ENABLED"},
    )


def test_a_flood_of_unauthenticated_calls_is_bounded_and_throttled(client: TestClient, services: Services) -> None:
    before = len(services.audit_records.query(AuditQuery(limit=1000)))
    answers = [call(client, None, f"/{PREFIX}/kms/xks/v1/health", {}) for _ in range(10)]
    names = [body["errorName"] for _, body in answers]
    assert names[:BURST] == ["AuthenticationFailedException"] * BURST
    assert set(names[BURST:]) == {"ThrottlingException"} and {s for s, _ in answers[BURST:]} == {429}
    assert len(services.audit_records.query(AuditQuery(limit=1000))) - before <= 2


def test_a_key_stores_bad_body_is_audited_as_its_refusal(
    client: TestClient, services: Services, store: tuple[str, str]
) -> None:
    status, refused = call(client, store, f"/{PREFIX}/kms/xks/v1/keys/k/encrypt", b"not json")
    assert (status, refused["errorName"]) == (400, "ValidationException")
    last = services.audit_records.query(AuditQuery(principal="aws"))[-1].entry
    assert (last.action, last.status, last.details["error"]) == ("xks.Encrypt", 400, "ValidationException")
    assert last.details["externalKeyId"] == "k"
