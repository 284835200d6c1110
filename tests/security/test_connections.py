"""Slow and oversized request heads, stalled TLS handshakes and idle connections are bounded,
while other clients keep being served (a real server over TLS)."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.conftest import Server, running_server

HEAD_TIMEOUT = 2.0
SLACK = 2.0


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("connections"),
        workers=1,
        KM_HEADER_TIMEOUT_SECONDS=str(HEAD_TIMEOUT),
        KM_TLS_HANDSHAKE_TIMEOUT_SECONDS=str(HEAD_TIMEOUT),
        KM_KEEPALIVE_TIMEOUT_SECONDS="1",
    ) as server:
        yield server


def _address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("https://").split(":")
    return host, int(port)


def _tls(server: Server) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(server.ca))
    raw = socket.create_connection(_address(server), timeout=HEAD_TIMEOUT + 10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _read_until_closed(conn: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except (ssl.SSLError, ConnectionResetError):
        pass
    return data


def _health(server: Server) -> int:
    with server.client() as client:
        return client.get("/v1/health").status_code


def test_a_half_sent_head_is_answered_408_and_closed_while_others_are_served(strict_server: Server) -> None:
    with _tls(strict_server) as conn:
        started = time.monotonic()
        conn.sendall(b"POST /v1/keys/cards/encrypt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        assert _health(strict_server) == 200  # another client is served meanwhile
        answer = _read_until_closed(conn)
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "invalid_request"
    assert HEAD_TIMEOUT - 0.5 <= elapsed <= HEAD_TIMEOUT + SLACK


def test_a_connection_that_sends_nothing_is_closed(strict_server: Server) -> None:
    with _tls(strict_server) as conn:
        started = time.monotonic()
        answer = _read_until_closed(conn)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started <= HEAD_TIMEOUT + SLACK


def test_a_stalled_tls_handshake_is_dropped(strict_server: Server) -> None:
    with socket.create_connection(_address(strict_server), timeout=HEAD_TIMEOUT + 10) as raw:
        started = time.monotonic()
        raw.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
        with contextlib.suppress(ConnectionResetError):
            assert raw.recv(4096) == b""
        elapsed = time.monotonic() - started
    assert elapsed <= HEAD_TIMEOUT + SLACK
    assert _health(strict_server) == 200


def test_a_head_over_16_kib_is_refused_with_431(strict_server: Server) -> None:
    with _tls(strict_server) as conn:
        conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Padding: " + b"a" * 20_000 + b"\r\n\r\n")
        answer = _read_until_closed(conn)
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert _health(strict_server) == 200


def test_a_large_but_allowed_head_is_served(strict_server: Server) -> None:
    with strict_server.client() as client:
        assert client.get("/v1/health", headers={"X-Padding": "a" * 12_000}).status_code == 200


def test_keep_alive_serves_several_requests_then_an_idle_connection_closes(strict_server: Server) -> None:
    with _tls(strict_server) as conn:
        for _ in range(3):
            conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):
                answer += conn.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        assert _read_until_closed(conn) == b""
    assert time.monotonic() - started <= 1 + SLACK


def test_the_server_log_names_no_secret(strict_server: Server) -> None:
    log = Path(strict_server.log).read_text()
    assert strict_server.admin_token not in log
    assert "Traceback" not in log
