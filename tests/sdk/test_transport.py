"""The clients' HTTP path (``_transport``, urllib3): against the real service over TLS, and against
a scripted socket server for the connection faults a real server seldom shows on cue.
Also: what the clients refuse at construction, and what a transport error says."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from keymanager_sdk import (
    APIError,
    AsyncKeyManager,
    ConfigurationError,
    Key,
    KeyManager,
    KeyManagerError,
    TransportError,
)

from keymanager.cli.tls import DevPki, ensure_dev_pki
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


def test_async_calls_run_concurrently(server: Server, app_principal: App, make_key: MakeKey) -> None:
    key = make_key()

    async def run() -> list[bool]:
        async with AsyncKeyManager(server.url, token=app_principal.token, ca=str(server.ca)) as client:

            async def roundtrip(i: int) -> bool:
                plaintext = os.urandom(1 + i)
                return await client.decrypt(await client.encrypt(key.name, plaintext)) == plaintext

            return await asyncio.gather(*(roundtrip(i) for i in range(64)))

    assert all(asyncio.run(run()))


def test_wrong_ca_is_a_transport_error_with_a_hint(server: Server, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text((server.var_dir / "tls" / "client-billing.pem").read_text())  # not the server's CA
    sleeps: list[float] = []
    with KeyManager(server.url, ca=str(other_ca), sleep=sleeps.append) as client, pytest.raises(TransportError) as e:
        client.health()
    assert len(sleeps) == 3  # health is retried: it is a read
    port = server.url.rsplit(":", 1)[1]
    message = str(e.value)
    assert message.startswith(f"GET https://127.0.0.1:{port}/v1/health: ")
    assert "CERTIFICATE_VERIFY_FAILED" in message and "ca=" in message and "KM_CA" in message


def test_plain_http_is_refused_before_anything_is_sent(server: Server) -> None:
    http_url = server.url.replace("https://", "http://")
    with pytest.raises(ConfigurationError, match="use https://"):
        KeyManager(http_url, max_retries=0)


def test_connection_refused_names_method_host_port_and_path() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with KeyManager(f"https://127.0.0.1:{port}", max_retries=0) as client, pytest.raises(TransportError) as failed:
        client.get_key("cards")
    assert str(failed.value).startswith(f"GET https://127.0.0.1:{port}/v1/keys/cards: ")
    assert "refused" in str(failed.value).lower() and failed.value.__cause__ is not None


def test_a_proxy_in_the_environment_is_honoured_and_no_proxy_too(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with KeyManager(server.url, ca=str(server.ca), max_retries=0) as client, pytest.raises(TransportError):
        client.health()  # through the (dead) proxy, so it fails; directly it would answer
    with KeyManager(server.url, ca=str(server.ca), max_retries=0, trust_env=False) as client:
        assert client.health().status == "ok"
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    with KeyManager(server.url, ca=str(server.ca), max_retries=0) as client:
        assert client.health().status == "ok"


# --- construction ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["127.0.0.1:8443", "https://", "ftp://km.example", "https://km.example:notaport", ""])
def test_a_url_without_scheme_or_host_is_refused_at_construction(url: str) -> None:
    with pytest.raises(ConfigurationError) as failed:
        KeyManager(url)
    assert isinstance(failed.value, ValueError) and isinstance(failed.value, KeyManagerError)
    with pytest.raises(ValueError):
        AsyncKeyManager(url)


def test_missing_or_bad_tls_files_are_refused_naming_the_path(server: Server, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "ca.pem"
    with pytest.raises(ConfigurationError, match=f"CA bundle {missing}: no such file"):
        KeyManager(server.url, ca=str(missing))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(ConfigurationError, match=str(garbage)):
        KeyManager(server.url, ca=str(garbage))
    with pytest.raises(ConfigurationError, match=f"client certificate {missing}"):
        KeyManager(server.url, ca=str(server.ca), client_cert=str(missing))


def test_from_env(server: Server, app_principal: App, make_key: MakeKey, tmp_path: Path) -> None:
    key = make_key()
    token_file = tmp_path / "token"
    token_file.write_text(app_principal.token + "\n")
    env = {"KM_URL": server.url, "KM_TOKEN_FILE": str(token_file), "KM_CA": str(server.ca)}
    with KeyManager.from_env(env, max_retries=0) as client:
        assert client.decrypt(client.encrypt(key.name, "4111")) == b"4111"

    async def run() -> bytes:
        async with AsyncKeyManager.from_env({**env, "KM_TOKEN": app_principal.token, "KM_TOKEN_FILE": ""}) as client:
            return await client.decrypt(await client.encrypt(key.name, b"x"))

    assert asyncio.run(run()) == b"x"
    with pytest.raises(ConfigurationError, match="KM_URL"):
        KeyManager.from_env({})
    with pytest.raises(ConfigurationError, match=f"token file {tmp_path / 'gone'}"):
        KeyManager.from_env({**env, "KM_TOKEN_FILE": str(tmp_path / "gone")})


# --- scripted faults -------------------------------------------------------------------------------


class ScriptedServer:
    """An HTTPS server on a socket (the development PKI's server certificate), answering each
    request on a connection with the next of ``answers`` (raw bytes; ``b""`` closes the connection
    without answering; ``None`` never answers), then closing the connection. Each connection is
    served by its own thread."""

    def __init__(self, answers: list[bytes | None], pki: DevPki) -> None:
        self.answers = answers
        self.ca = str(pki.ca_cert)
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.tls.load_cert_chain(pki.server_cert, pki.server_key)
        self.connections = 0
        self.requests = 0
        self.open_now = 0
        self.most_open = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.closed = threading.Semaphore(0)  # released once per connection the server has closed
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, plain: socket.socket) -> None:
        with self.lock:
            self.open_now += 1
            self.most_open = max(self.most_open, self.open_now)
        try:
            with self.tls.wrap_socket(plain, server_side=True) as conn:
                self._answer(conn)
        except (ssl.SSLError, OSError):
            plain.close()
        with self.lock:
            self.open_now -= 1
        self.closed.release()

    def _answer(self, conn: socket.socket) -> None:
        for answer in self.answers:
            if not _read_request(conn):
                return
            with self.lock:
                self.requests += 1
            if answer is None:
                self.stop.wait(30)
            if not answer:
                return
            conn.sendall(answer)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


def _read_request(conn: socket.socket) -> bool:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    fields = (line.partition(b":") for line in head.split(b"\r\n"))
    lengths = [int(v) for k, _, v in fields if k.lower() == b"content-length"]
    while len(body) < (lengths[0] if lengths else 0):
        body += conn.recv(65536)
    return True


HEALTH = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{"status":"ok"}'


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevPki:
    return ensure_dev_pki(tmp_path_factory.mktemp("pki"), client_names=())


@pytest.fixture
def scripted(pki: DevPki) -> Iterator[Callable[[list[bytes | None]], ScriptedServer]]:
    made: list[ScriptedServer] = []

    def make(answers: list[bytes | None]) -> ScriptedServer:
        made.append(ScriptedServer(answers, pki))
        return made[-1]

    yield make
    for server in made:
        server.close()


def test_a_connection_the_server_closed_while_idle_is_not_reused(
    scripted: Callable[[list[bytes | None]], ScriptedServer],
) -> None:
    server = scripted([HEALTH])  # one answer per connection, then the server closes it (keep-alive timeout)
    with KeyManager(server.url, ca=server.ca, max_retries=0) as client:
        for _ in range(3):
            assert client.health().status == "ok"
            assert server.closed.acquire(timeout=10)  # the server has closed the idle connection
    assert server.connections == 3 and server.requests == 3


def test_keep_alive_connections_are_reused(scripted: Callable[[list[bytes | None]], ScriptedServer]) -> None:
    server = scripted([HEALTH] * 5)
    with KeyManager(server.url, ca=server.ca, max_retries=0) as client:
        for _ in range(5):
            assert client.health().status == "ok"
    assert server.connections == 1 and server.requests == 5


def test_connections_are_bounded_by_max_connections(
    scripted: Callable[[list[bytes | None]], ScriptedServer],
) -> None:
    server = scripted([HEALTH] * 1000)
    limits = httpx.Limits(max_connections=2)
    with KeyManager(server.url, ca=server.ca, max_retries=0, limits=limits) as client, ThreadPoolExecutor(8) as pool:
        assert all(r.status == "ok" for r in pool.map(lambda _: client.health(), range(200)))
    assert server.connections <= 2 and server.requests == 200


def test_a_connection_dropped_mid_request_is_retried_for_reads_only(
    scripted: Callable[[list[bytes | None]], ScriptedServer],
) -> None:
    server = scripted([b""])  # every connection is dropped without an answer
    sleeps: list[float] = []
    with KeyManager(server.url, ca=server.ca, sleep=sleeps.append) as client:
        with pytest.raises(TransportError):
            client.health()
        assert len(sleeps) == 3 and server.requests == 4
        with pytest.raises(TransportError) as failed:
            client.create_principal("x", "app")  # a change: never sent twice
    assert server.requests == 5
    assert str(failed.value).startswith(f"POST {server.url}/v1/principals: ")


def test_the_read_timeout_is_honoured(scripted: Callable[[list[bytes | None]], ScriptedServer]) -> None:
    server = scripted([None])  # reads the request, never answers
    with (
        KeyManager(server.url, ca=server.ca, max_retries=0, timeout=0.5) as client,
        pytest.raises(TransportError) as failed,
    ):
        client.health()
    assert "timed out" in str(failed.value)


def test_a_malformed_answer_is_a_transport_error(scripted: Callable[[list[bytes | None]], ScriptedServer]) -> None:
    server = scripted([b"SMTP ready\r\n\r\n"])
    with KeyManager(server.url, ca=server.ca, max_retries=0) as client, pytest.raises(TransportError):
        client.health()


def test_an_error_answer_without_json_keeps_its_status(
    scripted: Callable[[list[bytes | None]], ScriptedServer],
) -> None:
    server = scripted([b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 3\r\n\r\nbad"])
    with KeyManager(server.url, ca=server.ca, max_retries=0) as client, pytest.raises(APIError) as failed:
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


def test_an_async_client_works_in_a_forked_child(server: Server, app_principal: App, make_key: MakeKey) -> None:
    key = make_key()

    async def roundtrip(client: AsyncKeyManager) -> bytes:
        return await client.decrypt(await client.encrypt(key.name, b"parent"))

    client = AsyncKeyManager(server.url, token=app_principal.token, ca=str(server.ca), max_retries=0, timeout=20)
    assert asyncio.run(roundtrip(client)) == b"parent"  # the parent now has a worker thread and a connection
    child = multiprocessing.get_context("fork").Process(target=_roundtrip_in_child, args=(client, roundtrip))
    child.start()
    child.join(timeout=60)
    if child.is_alive():  # hung: its calls went to worker threads that do not exist in a child
        child.kill()
        child.join()
    assert child.exitcode == 0
    assert asyncio.run(roundtrip(client)) == b"parent"
    asyncio.run(client.aclose())


def _roundtrip_in_child(client: AsyncKeyManager, roundtrip: Callable[[AsyncKeyManager], Any]) -> None:
    os._exit(0 if asyncio.run(roundtrip(client)) == b"parent" else 1)
