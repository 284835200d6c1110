"""The sync client's keep-alive lane for JSON calls (``_lane``): against the real service over TLS,
and against a scripted socket server for the connection faults a real server seldom shows on cue."""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from keymanager_sdk import APIError, Key, KeyManager, TransportError

from tests.e2e.conftest import Server
from tests.sdk.conftest import App

MakeKey = Callable[..., Key]


def test_threads_share_one_client(app: KeyManager, make_key: MakeKey) -> None:
    key = make_key()

    def roundtrip(i: int) -> bool:
        plaintext = os.urandom(1 + i % 700)
        return app.decrypt(app.encrypt(key.name, plaintext)) == plaintext

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(roundtrip, range(400)))


def test_wrong_ca_is_a_transport_error(server: Server, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text((server.var_dir / "tls" / "client-billing.pem").read_text())  # not the server's CA
    sleeps: list[float] = []
    with KeyManager(server.url, ca=str(other_ca), sleep=sleeps.append) as client, pytest.raises(TransportError):
        client.health()
    assert len(sleeps) == 3  # health is retried: it is a read


def test_a_proxy_in_the_environment_is_honoured(
    server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with KeyManager(server.url, ca=str(server.ca), max_retries=0) as client, pytest.raises(TransportError):
        client.health()  # through the (dead) proxy, so it fails; directly it would answer


class ScriptedServer:
    """A plain-HTTP server on a socket, answering each request on a connection with the next of ``answers``
    (raw bytes; ``b""`` closes the connection without answering), then closing the connection."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.connections = 0
        self.requests = 0
        self.closed = 0
        self.changed = threading.Condition()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                for answer in self.answers:
                    if not _read_request(conn):
                        break
                    self.requests += 1
                    if not answer:
                        break
                    conn.sendall(answer)
            with self.changed:
                self.closed += 1
                self.changed.notify_all()

    def wait_closed(self, count: int, timeout: float = 10) -> None:
        """Return once the server has closed ``count`` connections (fail after ``timeout`` seconds)."""
        with self.changed:
            assert self.changed.wait_for(lambda: self.closed >= count, timeout), f"{self.closed} of {count} closed"

    def close(self) -> None:
        self.listener.close()


def _read_request(conn: socket.socket) -> bool:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(v)
            for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
            if k.lower() == b"content-length"
        ),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return True


HEALTH = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{"status":"ok"}'


@pytest.fixture
def scripted() -> Iterator[Callable[[list[bytes]], ScriptedServer]]:
    made: list[ScriptedServer] = []

    def make(answers: list[bytes]) -> ScriptedServer:
        made.append(ScriptedServer(answers))
        return made[-1]

    yield make
    for server in made:
        server.close()


def test_a_connection_the_server_closed_while_idle_is_not_reused(
    scripted: Callable[[list[bytes]], ScriptedServer],
) -> None:
    server = scripted([HEALTH])  # one answer per connection, then the server closes it (keep-alive timeout)
    with KeyManager(f"http://127.0.0.1:{server.port}", max_retries=0) as client:
        for done in range(1, 4):
            assert client.health().status == "ok"
            server.wait_closed(done)  # the server has closed the connection before the next call
    assert server.connections == 3 and server.requests == 3


def test_keep_alive_connections_are_reused(scripted: Callable[[list[bytes]], ScriptedServer]) -> None:
    server = scripted([HEALTH] * 5)
    with KeyManager(f"http://127.0.0.1:{server.port}", max_retries=0) as client:
        for _ in range(5):
            assert client.health().status == "ok"
    assert server.connections == 1 and server.requests == 5


def test_a_connection_dropped_mid_request_is_retried_for_reads_only(
    scripted: Callable[[list[bytes]], ScriptedServer],
) -> None:
    server = scripted([b""])  # every connection is dropped without an answer
    sleeps: list[float] = []
    with KeyManager(f"http://127.0.0.1:{server.port}", sleep=sleeps.append) as client:
        with pytest.raises(TransportError):
            client.health()
        assert len(sleeps) == 3 and server.requests == 4
        with pytest.raises(TransportError):
            client.create_principal("x", "app")  # a change: never sent twice
    assert server.requests == 5


def test_a_malformed_answer_is_a_transport_error(scripted: Callable[[list[bytes]], ScriptedServer]) -> None:
    server = scripted([b"SMTP ready\r\n\r\n"])
    with KeyManager(f"http://127.0.0.1:{server.port}", max_retries=0) as client, pytest.raises(TransportError):
        client.health()


def test_an_error_answer_without_json_keeps_its_status(scripted: Callable[[list[bytes]], ScriptedServer]) -> None:
    server = scripted([b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 3\r\n\r\nbad"])
    with KeyManager(f"http://127.0.0.1:{server.port}", max_retries=0) as client, pytest.raises(APIError) as failed:
        client.health()
    assert (failed.value.status, failed.value.code) == (502, "http_error")


def test_a_forked_child_does_not_share_the_parents_connections(
    server: Server, app_principal: App, make_key: MakeKey
) -> None:
    key = make_key()
    with KeyManager(server.url, token=app_principal.token, ca=str(server.ca), max_retries=0) as client:
        ciphertext = client.encrypt(key.name, b"parent")  # the parent now holds an idle keep-alive connection
        child = multiprocessing.get_context("fork").Process(target=_decrypt_in_child, args=(client, ciphertext))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
        for _ in range(3):  # no retries: a connection disturbed by the child would fail here
            assert client.decrypt(ciphertext) == b"parent"


def _decrypt_in_child(client: KeyManager, ciphertext: str) -> None:
    for _ in range(3):
        if client.decrypt(ciphertext) != b"parent":
            os._exit(1)
    os._exit(0)
