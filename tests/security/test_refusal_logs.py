"""A stranger cannot fill the service's log with refused connections (a real server over TLS).

From one address: 200 connections of malformed HTTP (400), 100 heads over the limit (431), 20
heads that never finish (408), 60 connections that are not TLS, and one connection carrying 300
pipelined malformed requests. Bound: the address gets one log line at once and then one line per
``KM_REFUSAL_LOG_SECONDS`` (2 s here) with the counts, which add up to every refusal; uvicorn's
own line per malformed request is gone; each refusal is counted in ``km_connections_refused_total``.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import time
from pathlib import Path

import pytest

from tests.security.conftest import Server, running_server

STRANGER = "127.0.0.16"
INTERVAL = 2.0


def tls_connection(server: Server) -> ssl.SSLSocket:
    port = int(server.url.rpartition(":")[2])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(STRANGER, 0))
    return ssl.create_default_context(cafile=str(server.ca)).wrap_socket(sock, server_hostname="127.0.0.1")


def send_and_drain(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError), sock:
        sock.sendall(data)
        while sock.recv(65536):
            pass


def refused_counts(server: Server) -> dict[str, float]:
    with server.client(server.admin_token) as admin:
        text = admin.get("/metrics").text
    found = re.findall(r'^km_connections_refused_total\{reason="(\w+)"\} (\S+)$', text, re.MULTILINE)
    return {reason: float(value) for reason, value in found}


def summed(log: str) -> int:
    """The refusals of ``STRANGER`` the log has told of: its first line, then each summary's count."""
    return 1 + sum(int(n) for n in re.findall(rf"(\d+) more connections from {re.escape(STRANGER)} refused", log))


def logged_until_summed(server: Server, expected: int, deadline: float) -> str:
    """The server's log once its summaries add up to ``expected`` refusals (the last one is due an
    interval after the last refusal), or at ``deadline``."""
    while True:
        log = server.log.read_text()
        if summed(log) >= expected or time.monotonic() > deadline:
            return log
        time.sleep(0.1)


@pytest.mark.own_server
def test_hundreds_of_refused_connections_from_one_address_log_a_bounded_number_of_lines(tmp_path: Path) -> None:
    settings = {"KM_REFUSAL_LOG_SECONDS": str(INTERVAL), "KM_HEADER_TIMEOUT_SECONDS": "1"}
    with running_server(tmp_path, workers=1, **settings) as server:
        started = time.monotonic()
        for _ in range(200):
            send_and_drain(tls_connection(server), b"NOT HTTP AT ALL\r\n\r\n")
        for _ in range(100):
            send_and_drain(tls_connection(server), b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
        slow = [tls_connection(server) for _ in range(20)]
        for sock in slow:
            sock.sendall(b"GET / HTTP/1.1\r\n")
        for sock in slow:
            send_and_drain(sock, b"")
        port = int(server.url.rpartition(":")[2])
        for _ in range(60):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(STRANGER, 0))
            send_and_drain(sock, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP to the TLS port
        send_and_drain(tls_connection(server), b"BAD\r\n\r\n" * 300)
        elapsed = time.monotonic() - started
        log = logged_until_summed(server, 200 + 100 + 20 + 60 + 1, deadline=time.monotonic() + INTERVAL + 30)
        counts = refused_counts(server)
    lines = [line for line in log.splitlines() if STRANGER in line and "refused" in line]
    assert 2 <= len(lines) <= 2 + elapsed / INTERVAL + 1, lines
    assert summed(log) == 200 + 100 + 20 + 60 + 1, lines
    assert "Invalid HTTP request received" not in log
    assert counts.get("bad_request", 0) >= 201 and counts.get("head_too_large", 0) >= 100
    assert counts.get("head_timeout", 0) >= 20 and counts.get("tls", 0) >= 60
