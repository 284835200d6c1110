"""The front door against a real server over TLS: what an unauthenticated client can make it spend.

Each attack and its bound: a 100 MB body without credentials leaves the worker's memory as it
was (≤ 20 MB growth of its peak); a refused request writes at most 1 KiB of audit; 1,000 random
tokens leave the principal cache as it was; failures beyond the burst get 429 with Retry-After;
``PATCH /v1/keys/stream`` has the JSON limit, only the two stream routes take more.
"""

from __future__ import annotations

import secrets
import select
import socket
import sqlite3
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.security.conftest import Server, running_server

MB = 1_000_000
ONE_KIB = 1024
_AUDIT_BYTES = (
    "SELECT coalesce(sum(length(request_id) + coalesce(length(principal), 0) + length(action)"
    " + coalesce(length(key_id), 0) + length(outcome) + coalesce(length(client), 0) + length(details)"
    " + length(prev_hash) + length(hash) + 40), 0) FROM audit_records"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One worker (its memory and cache are the ones measured); a burst large enough for 1,000 failures."""
    home = tmp_path_factory.mktemp("front-door")
    with running_server(home, workers=1, KM_AUTH_FAILURE_BURST="5000", KM_AUTH_FAILURES_PER_SECOND="100") as started:
        yield started


def client_from(server: Server, address: str, token: str | None = None) -> httpx.Client:
    """A client whose connections come from ``address`` (any 127/8 address is this host): its own bucket."""
    context = ssl.create_default_context(cafile=str(server.ca))
    transport = httpx.HTTPTransport(verify=context, local_address=address)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, transport=transport, headers=headers, timeout=30)


def worker_pid(server: Server) -> int:
    return (server.worker_pids() or [server.pid])[0]


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def send_unauthenticated(server: Server, path: str, size: int, *, chunked: bool) -> tuple[str, int]:
    """Send a request head and up to ``size`` body bytes without credentials, as fast as the server
    takes them; (the answer's head, the body bytes the server took before it stopped reading)."""
    host, port = server.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(server.ca))
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    block = b'{"items": [' + b'{"plaintext": "QUFB"},' * 40_000
    if chunked:
        block = f"{len(block):x}\r\n".encode() + block + b"\r\n"
    with context.wrap_socket(socket.create_connection((host, int(port)), timeout=30), server_hostname=host) as sock:
        sock.sendall(head.encode())
        sent, answer = 0, b""
        try:
            while sent < size and not answer:
                sock.sendall(block)
                sent += len(block)
                if select.select([sock], [], [], 0)[0] or sock.pending():
                    answer = sock.recv(4096)
            answer = answer or sock.recv(4096)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the server answered and closed: the rest of the body is never read
    return answer.decode(errors="replace"), sent


def audit_bytes(server: Server) -> int:
    with sqlite3.connect(server.var_dir / "keymanager.db") as db:
        return int(db.execute(_AUDIT_BYTES).fetchone()[0])


def principal_cache_entries(server: Server) -> float:
    with server.client(server.admin_token) as admin:
        text = admin.get("/metrics").text
    return sum(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith('km_cache_entries{cache="principals"}')
    )


@pytest.mark.parametrize(
    ("path", "chunked"),
    [
        ("/v1/keys/cards/encrypt/batch", True),
        ("/v1/keys/cards/encrypt/stream", False),
        ("/v1/keys/cards/decrypt/stream", True),
        ("/v1/keys/cards/encrypt", True),
    ],
)
def test_an_unauthenticated_100_mb_body_leaves_worker_memory_as_it_was(
    server: Server, path: str, chunked: bool
) -> None:
    pid = worker_pid(server)
    _, peak_before = memory_mb(pid)
    answer, sent = send_unauthenticated(server, path, 100 * MB, chunked=chunked)
    _, peak_after = memory_mb(pid)
    assert peak_after - peak_before <= 20, (peak_before, peak_after)
    assert sent < 100 * MB  # the server stopped taking the body
    if answer:  # a reset may cut the answer off; when it arrives, it is the refusal
        assert answer.startswith("HTTP/1.1 401"), answer[:200]
        assert "connection: close" in answer.lower()


def test_a_refused_request_writes_at_most_1_kib_of_audit(server: Server) -> None:
    before = audit_bytes(server)
    refused = 0
    with client_from(server, "127.0.0.11", "kmt_" + secrets.token_urlsafe(32)) as stranger:
        response = stranger.post("/v1/keys/" + "a" * 60_000 + "/encrypt", json={"plaintext": "QUFB"})
        assert response.status_code in (400, 431)  # not a key name (or an overlong head): refused before anything
        for _ in range(20):
            response = stranger.post("/v1/keys/" + "k" * 128 + "/encrypt", json={"plaintext": "QUFB"})
            assert response.status_code == 401
        refused = 21
    written = audit_bytes(server) - before
    assert 0 < written <= ONE_KIB  # one summary record of the interval, bounded
    assert written / refused <= ONE_KIB


def test_a_thousand_random_tokens_leave_the_principal_cache_as_it_was(server: Server) -> None:
    principal_cache_entries(server)  # the admin's own entry
    before = principal_cache_entries(server)
    with client_from(server, "127.0.0.12") as stranger:
        for _ in range(1000):
            token = "kmt_" + secrets.token_urlsafe(32)
            response = stranger.post(
                "/v1/decrypt", json={"ciphertext": "x"}, headers={"Authorization": f"Bearer {token}"}
            )
            assert response.status_code == 401
    assert principal_cache_entries(server) == before >= 1


def test_patch_of_a_key_named_stream_has_the_json_limit(server: Server) -> None:
    big = b'{"description": "' + b"A" * (2 * MB) + b'"}'
    with server.client(server.admin_token) as admin:
        response = admin.patch("/v1/keys/stream", content=big, headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
        response = admin.patch(
            "/v1/keys/stream", content=iter([big[:MB], big[MB:]]), headers={"content-type": "application/json"}
        )
        assert response.status_code == 413


def test_the_stream_routes_take_large_bodies_once_authenticated(server: Server) -> None:
    with server.client(server.admin_token) as admin:
        made = admin.post("/v1/principals", json={"name": "streamer", "role": "app"}).json()["token"]
        policy = {"encrypt": ["streamer"], "decrypt": ["streamer"]}
        assert admin.post("/v1/keys", json={"name": "blobs", "policy": policy}).status_code == 201
    blob = secrets.token_bytes(3 * MB)
    with server.client(made) as app:
        sealed = app.post(
            "/v1/keys/blobs/encrypt/stream", content=blob, headers={"content-type": "application/octet-stream"}
        )
        assert sealed.status_code == 200, sealed.text
        opened = app.post(
            "/v1/keys/blobs/decrypt/stream",
            content=sealed.content,
            headers={"content-type": "application/octet-stream"},
        )
        assert opened.status_code == 200 and opened.content == blob


@pytest.mark.own_server
def test_failed_authentications_beyond_the_burst_get_429_with_retry_after(tmp_path: Path) -> None:
    settings = {"KM_AUTH_FAILURE_BURST": "5", "KM_AUTH_FAILURES_PER_SECOND": "0.2"}
    with running_server(tmp_path, workers=1, **settings) as server, client_from(server, "127.0.0.13") as stranger:
        for _ in range(5):
            assert stranger.get("/v1/keys", headers={"Authorization": "Bearer kmt_guess"}).status_code == 401
        throttled = stranger.get("/v1/keys", headers={"Authorization": "Bearer kmt_guess"})
        assert throttled.status_code == 429
        assert throttled.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(throttled.headers["retry-after"]) <= 5
        with server.client(server.admin_token) as admin:  # another address is served
            assert admin.get("/v1/keys").status_code == 200
            metrics = admin.get("/metrics").text
        assert any(
            line.startswith("km_auth_throttled_total") and float(line.split()[-1]) >= 1 for line in metrics.splitlines()
        )
