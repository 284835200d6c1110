"""An app principal with an access key on the session's ``kms_server`` (``tests/conftest.py``), boto3 clients of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.e2e.conftest import Server

REGION = "eu-west-1"
ACCOUNT = "111122223333"


@dataclass(frozen=True)
class Pair:
    principal: str
    access_key_id: str
    secret_access_key: str


def new_pair(server: Server, name: str, role: str) -> Pair:
    """A principal ``name`` with ``role`` and a generated access key."""
    with server.client(server.admin_token) as admin:
        assert admin.post("/v1/principals", json={"name": name, "role": role}).status_code == 201
        made = admin.post(f"/v1/principals/{name}/access-keys", json={})
        assert made.status_code == 201, made.text
        body = made.json()
    return Pair(name, body["access_key_id"], body["secret_access_key"])


@pytest.fixture(scope="session")
def admin_pair(kms_server: Server) -> Pair:
    return new_pair(kms_server, "kms-admin", "admin")


@pytest.fixture(scope="session")
def app_pair(kms_server: Server) -> Pair:
    return new_pair(kms_server, "kms-app", "app")


KmsFactory = Callable[..., Any]


@pytest.fixture(scope="session")
def kms_client(kms_server: Server) -> KmsFactory:
    """``kms_client(pair)``: boto3's ``kms`` client pointed at the server (``endpoint_url``)."""

    def make(pair: Pair, **config: Any) -> Any:
        return boto3.client(
            "kms",
            endpoint_url=kms_server.url,
            region_name=REGION,
            aws_access_key_id=pair.access_key_id,
            aws_secret_access_key=pair.secret_access_key,
            verify=str(kms_server.ca),
            config=Config(retries={"max_attempts": 1}, **config),
        )

    return make


@pytest.fixture(scope="session")
def admin_kms(kms_client: KmsFactory, admin_pair: Pair) -> Any:
    return kms_client(admin_pair)


@pytest.fixture(scope="session")
def app_kms(kms_client: KmsFactory, app_pair: Pair) -> Any:
    return kms_client(app_pair)
