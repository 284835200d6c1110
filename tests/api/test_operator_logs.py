"""Logs operators can use: JSON lines with the request's fields, an access log, ids that survive a hop.

The log lines are captured from the real handler the service installs (``api/logs.configure``)
on the test's stderr; request ids and trace context are checked on the response, the error
body, the log line and the audit record.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.api import logs
from keymanager.api.app import create_app
from keymanager.config import Settings
from keymanager.domain.models import Role
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from tests.api.support import assert_error, b64, use_policy
from tests.conftest import auth, make_settings

CARD = "4111111111111111"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def logged(tmp_path: Any, hsm: Hsm, capsys: pytest.CaptureFixture[str]) -> Iterator[tuple[TestClient, Services]]:
    """A client of an app with the access log on, its services; the service's JSON handler installed."""
    settings: Settings = make_settings(tmp_path / "var", access_log=True, log_format="json")
    services = Services.build(settings, hsm=hsm)
    logs.configure("info", settings.resolved_log_format(), settings.access_log)
    try:
        with TestClient(create_app(services=services), base_url="https://testserver") as client:
            yield client, services
    finally:
        for name in logs.LOGGERS:
            logger = logging.getLogger(name)
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
        logging.getLogger(logs.ACCESS_LOGGER).setLevel(logging.NOTSET)
        services.close()


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every stderr line, each parsed as JSON (a line that is not JSON fails the test)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_access_log_lines_are_json_with_the_request_fields_and_no_secret(
    logged: tuple[TestClient, Services], capsys: pytest.CaptureFixture[str]
) -> None:
    client, services = logged
    capsys.readouterr()
    admin_token = services.principals.create("admin", Role.ADMIN).token
    admin = auth(admin_token)
    billing = client.post("/v1/principals", json={"name": "billing", "role": "app"}, headers=admin).json()
    client.post("/v1/keys", json={"name": "cards", "policy": use_policy("billing")}, headers=admin)
    sealed = client.post(
        "/v1/keys/cards/encrypt",
        json={"plaintext": b64(CARD.encode())},
        headers={**auth(billing["token"]), "X-Request-ID": "order-17.retry_2", "traceparent": TRACEPARENT},
    )
    assert sealed.status_code == 200, sealed.text
    refused = client.get("/v1/keys/cards", headers=auth(billing["token"] + "x"))
    assert refused.status_code == 401

    err = capsys.readouterr().err
    lines = json_lines(err)
    access = [line for line in lines if line["logger"] == logs.ACCESS_LOGGER]
    encrypt = next(line for line in access if line["request_id"] == "order-17.retry_2")
    assert {"time", "level", "logger", "message"} <= set(encrypt)
    assert encrypt["time"].endswith("+00:00") and encrypt["level"] == "INFO"
    assert encrypt["route"] == "/v1/keys/{key}/encrypt" and encrypt["method"] == "POST"
    assert encrypt["status"] == 200 and isinstance(encrypt["duration_ms"], float) and encrypt["duration_ms"] >= 0
    assert encrypt["principal_id"] == billing["id"] and encrypt["traceparent"] == TRACEPARENT
    failed = next(line for line in access if line["request_id"] == refused.headers["x-request-id"])
    assert failed["status"] == 401 and "principal_id" not in failed and "route" not in failed
    assert failed["path"] == "/v1/keys/cards" and failed["message"] == "GET /v1/keys/cards 401"
    assert len(access) == 4  # one line per request: principal, key, encrypt, refused read
    for secret in (admin_token, billing["token"], CARD, b64(CARD.encode()), sealed.json()["ciphertext"]):
        assert secret not in err
    assert "Bearer" not in err and "authorization" not in err.lower()


def test_text_format_carries_the_same_fields(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", "text", access_log=True)
    try:
        scope = {"type": "http", "method": "GET", "path": "/v1/x", "state": {"request_id": "r-1", "principal_id": "p1"}}
        with logs.request_scope(scope):
            logging.getLogger("keymanager.test").warning("something happened")
    finally:
        for name in logs.LOGGERS:
            for handler in list(logging.getLogger(name).handlers):
                logging.getLogger(name).removeHandler(handler)
    line = capsys.readouterr().err.strip()
    assert line.endswith(
        "+00:00 WARNING keymanager.test: something happened [request_id=r-1 principal_id=p1 method=GET path=/v1/x]"
    )


def test_log_format_defaults_to_json_in_production_and_text_in_development() -> None:
    assert Settings(env="development").resolved_log_format() == "text"
    assert Settings(env="production", pkcs11_pin="a-real-pin-1234").resolved_log_format() == "json"
    assert Settings(env="production", pkcs11_pin="a-real-pin-1234", log_format="text").resolved_log_format() == "text"


def test_a_valid_request_id_and_traceparent_come_back_everywhere(
    client: TestClient, admin: dict[str, str], new_key: Callable[..., dict[str, Any]]
) -> None:
    new_key("traced")
    headers = {**admin, "X-Request-ID": "A1.b2_c3-d4", "traceparent": TRACEPARENT}

    read = client.get("/v1/keys/traced", headers=headers)
    missing = client.get("/v1/keys/no-such-key", headers=headers)

    assert read.headers["x-request-id"] == "A1.b2_c3-d4" and read.headers["traceparent"] == TRACEPARENT
    assert assert_error(missing, 404, "key_not_found")["request_id"] == "A1.b2_c3-d4"
    records = client.get("/v1/audit", params={"key": "traced"}, headers=admin).json()["records"]
    mine = [r for r in records if r["request_id"] == "A1.b2_c3-d4"]
    assert [r["action"] for r in mine] == ["key.read"]
    assert mine[0]["details"]["traceparent"] == TRACEPARENT


@pytest.mark.parametrize(
    "request_id",
    ["x" * 65, "has space", "semi;colon", "ünïcode", "", "line\r\nbreak", "slash/es"],
)
def test_an_invalid_request_id_is_replaced_by_ours(client: TestClient, request_id: str) -> None:
    answer = client.get("/v1/health", headers={"X-Request-ID": request_id.encode("utf-8", "replace")})  # type: ignore[dict-item]

    ours = answer.headers["x-request-id"]
    assert ours != request_id and len(ours) == 32 and int(ours, 16) >= 0


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero parent id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # version 00 has four fields
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
        "not a traceparent",
    ],
)
def test_an_invalid_traceparent_is_dropped(client: TestClient, traceparent: str) -> None:
    answer = client.get("/v1/health", headers={"traceparent": traceparent})
    assert answer.status_code == 200 and "traceparent" not in answer.headers


def test_a_later_traceparent_version_keeps_its_first_four_fields(client: TestClient) -> None:
    later = "01" + TRACEPARENT[2:]
    answer = client.get("/v1/health", headers={"traceparent": later + "-what-comes-next"})
    assert answer.headers["traceparent"] == later
