"""A client hanging up mid-upload or mid-download: one WARNING line, no traceback, audited 499.

The app is driven through ASGI directly, as uvicorn drives it (ASGI spec 2.3: a hang-up is an
``http.disconnect`` message), so the disconnect comes exactly where the test puts it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.domain.audit import AuditQuery
from keymanager.services.container import Services
from tests.conftest import auth

Message = dict[str, Any]


@pytest.fixture
def app_token(client: TestClient, admin_token: str) -> str:
    made = client.post("/v1/principals", json={"name": "mover", "role": "app"}, headers=auth(admin_token))
    body = {"name": "blob", "algorithm": "AES_256_GCM", "policy": {"encrypt": ["mover"], "decrypt": ["mover"]}}
    assert client.post("/v1/keys", json=body, headers=auth(admin_token)).status_code == 201
    return str(made.json()["token"])


def drive(
    services: Services,
    path: str,
    token: str,
    receive: Callable[[], Awaitable[Message]],
    length: int,
    body_sent: asyncio.Event | None = None,
) -> list[Message]:
    """Run one POST through the app with ``receive``; the messages the app sent (``body_sent``
    is set once a chunk of the answer's body went out)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/octet-stream"),
            (b"content-length", str(length).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 443),
    }
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and body_sent is not None:
            body_sent.set()

    async def run() -> None:
        await asyncio.wait_for(create_app(services=services)(scope, receive, send), timeout=30)

    asyncio.run(run())
    return sent


def statuses(services: Services, action: str) -> list[int]:
    return [r.entry.status for r in services.audit_records.query(AuditQuery(action=action, limit=100))]


def assert_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1, [r.getMessage() for r in loud]
    assert loud[0].levelno == logging.WARNING
    assert "hung up" in loud[0].getMessage()
    assert loud[0].exc_info is None and loud[0].exc_text is None


def test_a_hang_up_mid_upload_is_one_warning_and_a_499_record(
    services: Services, app_token: str, caplog: pytest.LogCaptureFixture
) -> None:
    messages = iter(
        [
            {"type": "http.request", "body": os.urandom(64 * 1024), "more_body": True},
            {"type": "http.disconnect"},
        ]
    )

    async def receive() -> Message:
        return next(messages, {"type": "http.disconnect"})

    caplog.set_level(logging.INFO)
    sent = drive(services, "/v1/keys/blob/encrypt/stream", app_token, receive, 10_000_000)
    assert sent == []  # nothing to answer: the client is gone
    assert_one_warning(caplog)
    assert statuses(services, "key.encrypt_stream") == [499]
    assert services.spool.used == 0
    assert services.audit_records.verify().ok


def test_a_hang_up_mid_download_is_one_warning_and_a_499_record(
    client: TestClient, services: Services, app_token: str, caplog: pytest.LogCaptureFixture
) -> None:
    services.settings.stream_segment_bytes = 4096
    data = os.urandom(64 * 4096)
    headers = {**auth(app_token), "Content-Type": "application/octet-stream"}
    stream = client.post("/v1/keys/blob/encrypt/stream", content=data, headers=headers).content
    first_chunk_sent = asyncio.Event()
    uploaded = False

    async def receive() -> Message:
        nonlocal uploaded
        if not uploaded:
            uploaded = True
            return {"type": "http.request", "body": stream, "more_body": False}
        await first_chunk_sent.wait()  # the client hangs up once the first plaintext chunk went out
        return {"type": "http.disconnect"}

    caplog.set_level(logging.INFO)
    sent = drive(services, "/v1/keys/blob/decrypt/stream", app_token, receive, len(stream), first_chunk_sent)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert not any(m["type"] == "http.response.body" and not m.get("more_body") for m in sent)
    assert_one_warning(caplog)
    assert statuses(services, "key.decrypt_stream") == [200, 499]
    assert services.spool.used == 0
    assert services.audit_records.verify().ok
