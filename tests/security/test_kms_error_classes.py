"""Every error class of ``keymanager/errors.py`` has its KMS answer (issue 20, item 8).

The finding: ``domain/kms.py`` ``_AWS_CODES`` had no row for the key-pending-import error, so the
KMS door answered it 500 ``KMSInternalException``; no test walked every error class. The bound:
each class, raised by a KMS operation (the fault injected into the real door, app and services,
the request signed by botocore), is answered with an error of AWS KMS's model (or AWS's common
errors), never 500; only an error of no class of ours is ``KMSInternalException``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from fastapi.testclient import TestClient

from keymanager import errors
from keymanager.api.app import create_app
from keymanager.domain.models import Role
from keymanager.services.container import Services

URL = "https://127.0.0.1:8443"  # the listen address of the test settings: one of the service's own names
COMMON_ERRORS = {"AccessDeniedException", "ThrottlingException", "UnrecognizedClientException", "ValidationException"}
"""Errors every AWS JSON service may answer, outside each service's own model."""


def error_classes() -> list[type[errors.KeyManagerError]]:
    """Every error class of ``keymanager/errors.py`` below the base."""
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.KeyManagerError) and cls is not errors.KeyManagerError
    ]


def kms_errors() -> set[str]:
    model = botocore.session.get_session().get_service_model("kms")
    return {shape.name for shape in model.error_shapes} | COMMON_ERRORS


@pytest.fixture
def door(services: Services) -> Iterator[tuple[TestClient, Credentials]]:
    services.principals.create("walker", Role.ADMIN)
    key_id, secret, _ = services.access_keys.create("walker")
    with TestClient(create_app(services=services), base_url=URL) as client:
        yield client, Credentials(key_id, secret)


def generate_random(client: TestClient, credentials: Credentials) -> Any:
    body = b'{"NumberOfBytes": 8}'
    headers = {"X-Amz-Target": "TrentService.GenerateRandom", "Content-Type": "application/x-amz-json-1.1"}
    request = AWSRequest(method="POST", url=URL + "/", data=body, headers=headers)
    SigV4Auth(credentials, "kms", "eu-west-1").add_auth(request)
    return client.post("/", content=body, headers=dict(request.headers.items()))


def test_the_walk_covers_the_classes_the_issue_names() -> None:
    assert {errors.KeyPendingImport, errors.PreconditionFailed, errors.SpoolBusy} <= set(error_classes())
    assert len(error_classes()) >= 20


@pytest.mark.parametrize("kind", error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_through_the_kms_door(
    door: tuple[TestClient, Credentials], services: Services, monkeypatch: pytest.MonkeyPatch, kind: type
) -> None:
    client, credentials = door
    assert generate_random(client, credentials).status_code == 200

    async def failing(snapshot: Any, call: Any) -> Any:
        raise kind()

    monkeypatch.setitem(services.kms_crypto.operations, "GenerateRandom", failing)
    answer = generate_random(client, credentials)
    code = answer.json()["__type"]
    assert answer.status_code != 500 and code != "KMSInternalException", (kind, answer.status_code, answer.text)
    assert code in kms_errors(), code
    assert answer.status_code == (503 if kind().status == 503 else 400), answer.text


def test_only_an_error_of_no_class_of_ours_is_internal(
    door: tuple[TestClient, Credentials], services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, credentials = door

    async def failing(snapshot: Any, call: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setitem(services.kms_crypto.operations, "GenerateRandom", failing)
    answer = generate_random(client, credentials)
    assert (answer.status_code, answer.json()["__type"]) == (500, "KMSInternalException")
    assert "a bug" not in answer.text
