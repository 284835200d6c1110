"""A real two-worker server over TLS, two key stores (principals of role xks) with access keys, keys
for them, and two independent SigV4 signers of XKS requests: botocore's ``SigV4Auth`` and curl's
``--aws-sigv4``."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.e2e.conftest import Server

REGION = "eu-west-1"
SERVICE = "kms-xks-proxy"
PREFIX_A = "keystores/store-a"
PREFIX_B = "keystores/store-b"


@dataclass(frozen=True)
class KeyStore:
    name: str
    prefix: str
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]

    @property
    def error(self) -> str | None:
        return self.body.get("errorName")


Body = dict[str, Any] | bytes
Signer = Callable[..., Answer]
"""``sign(store, path, body, *, service=SERVICE, region=REGION, method="POST", secret=None)``: the answer."""


def metadata(operation: str = "Encrypt", **extra: str) -> dict[str, str]:
    """A ``requestMetadata`` as AWS KMS sends it."""
    return {
        "awsPrincipalArn": "arn:aws:iam::123456789012:user/Alice",
        "kmsKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "kmsOperation": operation,
        "kmsRequestId": "4112f4d6-db54-4af4-ae30-c55a22a8dfae",
        **extra,
    }


def key_path(store: KeyStore, key: str, operation: str) -> str:
    return f"/{store.prefix}/kms/xks/v1/keys/{key}/{operation}"


def health_path(store: KeyStore) -> str:
    return f"/{store.prefix}/kms/xks/v1/health"


@pytest.fixture(scope="session")
def xks_server(kms_server: Server) -> Server:
    """The session's server of the AWS doors (``tests/conftest.py``: a failed-authentication burst the
    refusal tests never spend)."""
    return kms_server


def new_store(server: Server, name: str, prefix: str, region: str | None = REGION) -> KeyStore:
    """A key store ``name`` at ``prefix`` with a generated access key."""
    with server.client(server.admin_token) as admin:
        body = {"name": name, "role": "xks", "xks_uri_prefix": prefix, "xks_region": region}
        made = admin.post("/v1/principals", json=body)
        assert made.status_code == 201, made.text
        pair = admin.post(f"/v1/principals/{name}/access-keys", json={})
        assert pair.status_code == 201, pair.text
    return KeyStore(name, prefix, pair.json()["access_key_id"], pair.json()["secret_access_key"])


@pytest.fixture(scope="session")
def store_a(xks_server: Server) -> KeyStore:
    return new_store(xks_server, "store-a", PREFIX_A)


@pytest.fixture(scope="session")
def store_b(xks_server: Server) -> KeyStore:
    return new_store(xks_server, "store-b", PREFIX_B)


def new_key(server: Server, name: str, policy: dict[str, list[str]], algorithm: str = "AES_256_GCM") -> str:
    """A key ``name`` with ``policy``; its id."""
    with server.client(server.admin_token) as admin:
        made = admin.post("/v1/keys", json={"name": name, "algorithm": algorithm, "policy": policy})
        assert made.status_code == 201, made.text
    return str(made.json()["id"])


@pytest.fixture(scope="session")
def both_key(xks_server: Server, store_a: KeyStore) -> str:
    """An AES_256_GCM key store-a may encrypt and decrypt with."""
    return new_key(xks_server, "xks-both", {"encrypt": [store_a.name], "decrypt": [store_a.name]})


def _signed(store: KeyStore, url: str, body: bytes, service: str, region: str, secret: str | None) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    credentials = Credentials(store.access_key_id, secret or store.secret_access_key)
    SigV4Auth(credentials, service, region).add_auth(request)
    return dict(request.headers.items())


def _encoded(body: Body) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def _answer(status: int, text: str) -> Answer:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = {"raw": text}
    return Answer(status, parsed if isinstance(parsed, dict) else {"raw": parsed})


@pytest.fixture(scope="session")
def botocore_signer(xks_server: Server) -> Signer:
    """Requests signed by botocore's ``SigV4Auth(credentials, "kms-xks-proxy", region)``, sent by httpx."""

    def sign(
        store: KeyStore,
        path: str,
        body: Body,
        *,
        service: str = SERVICE,
        region: str = REGION,
        method: str = "POST",
        secret: str | None = None,
        signed: bool = True,
    ) -> Answer:
        url, data = xks_server.url + path, _encoded(body)
        headers = _signed(store, url, data, service, region, secret) if signed else {"Content-Type": "application/json"}
        with httpx.Client(verify=ssl.create_default_context(cafile=str(xks_server.ca)), timeout=30) as client:
            answer = client.request(method, url, content=data, headers=headers)
        return _answer(answer.status_code, answer.text)

    return sign


@pytest.fixture(scope="session")
def curl_signer(xks_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Signer:
    """Requests signed and sent by ``curl --aws-sigv4 "aws:amz:<region>:kms-xks-proxy"``."""
    folder = tmp_path_factory.mktemp("curl")

    def sign(
        store: KeyStore,
        path: str,
        body: Body,
        *,
        service: str = SERVICE,
        region: str = REGION,
        method: str = "POST",
        secret: str | None = None,
        signed: bool = True,
    ) -> Answer:
        payload = Path(folder / "body.json")
        payload.write_bytes(_encoded(body))
        command = ["curl", "-sS", "--cacert", str(xks_server.ca), "-X", method, "-o", "-", "-w", "\n%{http_code}"]
        if signed:
            secret = secret or store.secret_access_key
            command += ["--aws-sigv4", f"aws:amz:{region}:{service}", "--user", f"{store.access_key_id}:{secret}"]
        command += ["-H", "Content-Type: application/json", "--data-binary", f"@{payload}", xks_server.url + path]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
        text, _, status = done.stdout.rpartition("\n")
        return _answer(int(status), text)

    return sign


@pytest.fixture(params=["botocore", "curl"])
def signer(request: pytest.FixtureRequest) -> Signer:
    """Each independent signer in turn."""
    return request.getfixturevalue(f"{request.param}_signer")  # type: ignore[no-any-return]
