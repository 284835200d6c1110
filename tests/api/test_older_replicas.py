"""During a rolling upgrade, a principal a replica of the previous version made after migration 0018
(its ``principals`` row only, the credentials in the old columns) is served by this version at
every door that looks it up by name: by its certificate subject (at REST here; KMIP asks the same lookup) and, as a key
store, by its XKS URI prefix and region; SQLite and PostgreSQL."""

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
from starlette.types import ASGIApp, Receive, Scope, Send

from keymanager.api.app import create_app
from keymanager.db import make_engine
from keymanager.domain.models import Role
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from tests.api.test_xks_door import BASE, call, meta
from tests.conftest import auth, make_settings
from tests.db.test_credentials_table import as_an_older_replica
from tests.support.postgres import create_database, drop_database

SUBJECT = "x-test-client-subject"
"""A header the test's wrapper turns into the verified client certificate's subject, as the server's TLS does."""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def services(request: pytest.FixtureRequest, tmp_path: Path, hsm: Hsm) -> Iterator[Services]:
    if request.param == "sqlite":
        url = None
        (tmp_path / "var").mkdir(mode=0o700)
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), tmp_path / "var" / "keymanager.db")
    else:
        url = create_database(template=request.getfixturevalue("postgres_template"))
    built = Services.build(make_settings(tmp_path / "var", url, public_hosts=["testserver"]), hsm=hsm)
    try:
        yield built
    finally:
        built.close()
        if url is not None:
            drop_database(url)


def _presenting_subjects(app: ASGIApp) -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            subject = dict(scope["headers"]).get(SUBJECT.encode())
            if subject is not None:
                scope = {**scope, "extensions": {"tls": {"client_subject": subject.decode()}}}
        await app(scope, receive, send)

    return wrapped


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(_presenting_subjects(create_app(services=services)), base_url=BASE) as test_client:
        yield test_client


def signed(client: TestClient, pair: tuple[str, str], path: str, region: str) -> tuple[int, Any]:
    """A health check at ``path`` signed with ``pair`` for ``region``: its status and body."""
    data = json.dumps({"requestMetadata": meta("KmsHealthCheck")}).encode()
    request = AWSRequest(method="POST", url=BASE + path, data=data, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(*pair), "kms-xks-proxy", region).add_auth(request)
    answer = client.post(path, content=data, headers=dict(request.headers.items()))
    return answer.status_code, answer.json()


def older_replica(services: Services, name: str, role: str = "app", **columns: str) -> None:
    engine = make_engine(services.settings.resolved_database_url())
    try:
        as_an_older_replica(engine, name, role, **columns)
    finally:
        engine.dispose()


def test_its_certificate_subject_authenticates(client: TestClient, services: Services) -> None:
    older_replica(services, "old-app", cert_subject="CN=old-app,O=keymanager")
    assert client.get("/v1/keys", headers={SUBJECT: "CN=old-app,O=keymanager"}).status_code == 200
    assert client.get("/v1/keys", headers={SUBJECT: "CN=stranger"}).status_code == 401
    admin = auth(services.principals.create("admin", Role.ADMIN).token)
    shown = {p["name"]: p for p in client.get("/v1/principals", headers=admin).json()}
    assert shown["old-app"]["cert_subject"] == "CN=old-app,O=keymanager"
    taken = client.post(
        "/v1/principals", json={"name": "new", "role": "app", "cert_subject": "CN=old-app,O=keymanager"}, headers=admin
    )
    assert (taken.status_code, taken.json()["error"]["message"]) == (
        409,
        "a principal with certificate subject 'CN=old-app,O=keymanager' exists",
    )


def test_as_a_key_store_its_prefix_and_region_are_kept(client: TestClient, services: Services) -> None:
    older_replica(services, "aws-old", "xks", xks_uri_prefix="keystores/old", xks_region="eu-west-1")
    admin = auth(services.principals.create("admin", Role.ADMIN).token)
    pair = client.post("/v1/principals/aws-old/access-keys", json={}, headers=admin).json()
    key = {"name": "k", "algorithm": "AES_256_GCM", "policy": {"encrypt": ["aws-old"]}}
    assert client.post("/v1/keys", json=key, headers=admin).status_code == 201
    keys = (pair["access_key_id"], pair["secret_access_key"])
    body = {"requestMetadata": meta("Encrypt"), "plaintext": base64.b64encode(b"dk").decode()}
    body["encryptionAlgorithm"] = "AES_GCM"
    status, sealed = call(client, keys, "/keystores/old/kms/xks/v1/keys/k/encrypt", body)
    assert status == 200, sealed
    status, refused = call(client, keys, "/keystores/other/kms/xks/v1/keys/k/encrypt", body)
    assert (status, refused["errorName"]) == (404, "InvalidUriPathException")
    older_replica(services, "aws-east", "xks", xks_uri_prefix="keystores/east", xks_region="us-east-1")
    made = client.post("/v1/principals/aws-east/access-keys", json={}, headers=admin).json()
    east, health = (made["access_key_id"], made["secret_access_key"]), "/keystores/east/kms/xks/v1/health"
    assert signed(client, east, health, "us-east-1")[0] == 200
    assert signed(client, east, health, "eu-west-1")[1]["errorName"] == "AuthenticationFailedException"
    shown = {p["name"]: p for p in client.get("/v1/principals", headers=admin).json()}
    assert (shown["aws-old"]["xks_uri_prefix"], shown["aws-old"]["xks_region"]) == ("keystores/old", "eu-west-1")
    taken = client.post(
        "/v1/principals", json={"name": "aws-new", "role": "xks", "xks_uri_prefix": "keystores/old"}, headers=admin
    )
    assert (taken.status_code, taken.json()["error"]["message"]) == (
        409,
        "a key store with xks_uri_prefix 'keystores/old' exists",
    )
