"""Real client addresses behind a balancer, against a real server over TLS (and a real HAProxy).

The server trusts 127.0.0.9 (``KM_TRUSTED_PROXIES``) to send the PROXY header; every other
loopback address is a client of its own. Bounds: a PROXY header names the client in the audit
record and the throttle's bucket (v1 and v2, TLS and client certificates unchanged behind it); a
trusted address without a header, and any other address with one, is refused; a malformed,
truncated, oversized or slow header closes the connection within the header timeout (2 s here),
300 of them leave the worker's memory as it was (≤ 20 MB growth of its peak) and each is counted
in the metrics; behind HAProxy run from ``deploy/haproxy.cfg``, clients from 127.0.0.2 and
127.0.0.3 have their own ``client`` in the audit log and their own throttle buckets, and its health
checks (with their PROXY header) keep the replica up; with
``KM_PROXY_PROTOCOL=false``, ``X-Forwarded-For`` is believed from the trusted address only.
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from keymanager.serving.proxy_header import V2_SIGNATURE
from tests.e2e.conftest import free_port, wait_ready
from tests.security.conftest import Server, running_server
from tests.security.test_front_door import memory_mb, worker_pid

ROOT = Path(__file__).resolve().parents[2]
PROXY = "127.0.0.9"
HEADER_TIMEOUT = 2.0
CLOSED_WITHIN = 3 * HEADER_TIMEOUT  # the socket's own timeout: the server must close before it
BAD = "Bearer kmt_" + "b" * 43


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("addresses"),
        workers=1,
        KM_TRUSTED_PROXIES=f"{PROXY}/32",
        KM_HEADER_TIMEOUT_SECONDS=str(HEADER_TIMEOUT),
        KM_AUTH_FAILURE_BURST="3",
        KM_AUTH_FAILURES_PER_SECOND="0.01",
    ) as started:
        yield started


def port_of(url: str) -> int:
    return int(url.rpartition(":")[2])


def v1(client: str, port: int = 40000) -> bytes:
    family = "TCP4" if ipaddress.ip_address(client).version == 4 else "TCP6"
    destination = "127.0.0.1" if family == "TCP4" else "::1"
    return f"PROXY {family} {client} {destination} {port} 8443\r\n".encode()


def v2(client: str, port: int = 40000) -> bytes:
    address = ipaddress.ip_address(client)
    if address.version == 4:
        body = address.packed + socket.inet_aton("127.0.0.1") + struct.pack("!HH", port, 8443)
        return V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", len(body)) + body
    body = address.packed + ipaddress.IPv6Address("::1").packed + struct.pack("!HH", port, 8443)
    return V2_SIGNATURE + b"\x21\x21" + struct.pack("!H", len(body)) + body


def connect(server: Server, source: str, header: bytes = b"") -> socket.socket:
    sock = socket.create_connection(
        ("127.0.0.1", port_of(server.url)), timeout=CLOSED_WITHIN, source_address=(source, 0)
    )
    if header:
        sock.sendall(header)
    return sock


def get(server: Server, source: str, header: bytes, authorization: str, path: str = "/v1/keys") -> int:
    """The status of ``GET path`` over TLS on a connection from ``source`` that sends ``header`` first."""
    context = ssl.create_default_context(cafile=str(server.ca))
    with context.wrap_socket(connect(server, source, header), server_hostname="127.0.0.1") as tls:
        tls.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {authorization}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def refused(server: Server, source: str, header: bytes) -> bool:
    """Whether a TLS request from ``source`` after ``header`` is refused (the connection closed)."""
    try:
        get(server, source, header, BAD)
    except (ssl.SSLError, ConnectionError):
        return True
    return False


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` before its timeout (sending nothing)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def failure_clients(server: Server) -> list[str]:
    with server.client(server.admin_token) as admin:
        records = admin.get("/v1/audit", params={"limit": 1000}).json()["records"]
    return [r["client"] for r in records if r["action"] == "auth.failed"]


def metric(server: Server, name: str, label: str) -> float:
    with server.client(server.admin_token) as admin:
        text = admin.get("/metrics").text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name) and label in line)


def test_a_proxy_header_from_the_trusted_address_names_the_client(server: Server) -> None:
    assert get(server, PROXY, v1("203.0.113.7"), BAD) == 401
    assert get(server, PROXY, v2("203.0.113.8"), BAD) == 401
    assert get(server, PROXY, v2("2001:db8::9"), BAD) == 401
    assert get(server, PROXY, v1("203.0.113.10"), f"Bearer {server.admin_token}") == 200
    clients = failure_clients(server)
    assert {"203.0.113.7", "203.0.113.8", "2001:db8::9"} <= set(clients)
    assert PROXY not in clients


def test_client_certificates_pass_behind_a_proxy_header(server: Server) -> None:
    tls_dir = server.var_dir / "tls"  # the development client certificate of ``keymanager init``
    subject = "CN=billing,O=keymanager"
    with server.client(server.admin_token) as admin:
        made = admin.post("/v1/principals", json={"name": "behind-proxy", "role": "app", "cert_subject": subject})
        assert made.status_code == 201, made.text
    context = ssl.create_default_context(cafile=str(server.ca))
    context.load_cert_chain(str(tls_dir / "client-billing.pem"), str(tls_dir / "client-billing-key.pem"))
    with context.wrap_socket(connect(server, PROXY, v2("203.0.113.11")), server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GET /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def test_the_throttle_charges_the_named_client_not_the_proxy(server: Server) -> None:
    for _ in range(3):
        assert get(server, PROXY, v2("198.51.100.20"), BAD) == 401
    assert get(server, PROXY, v2("198.51.100.20"), BAD) == 429
    assert get(server, PROXY, v2("198.51.100.21"), BAD) == 401  # another client behind the same proxy


def test_a_trusted_address_without_a_header_and_an_untrusted_one_with_it_are_refused(server: Server) -> None:
    before = metric(server, "km_connections_refused_total", 'reason="untrusted_proxy_header"')
    assert refused(server, PROXY, b"")
    assert refused(server, "127.0.0.1", v1("203.0.113.12"))
    assert refused(server, "127.0.0.14", v2("203.0.113.13"))
    assert get(server, "127.0.0.14", b"", BAD) == 401  # the same address without a header is served
    assert metric(server, "km_connections_refused_total", 'reason="untrusted_proxy_header"') >= before + 2
    assert "203.0.113.12" not in failure_clients(server)


@pytest.mark.parametrize(
    "header",
    [
        b"PROXY TCP4 999.1.1.1 127.0.0.1 1 2\r\n",  # malformed
        b"PROXY TCP4 203.0.113.7 127.0.0.1",  # truncated: the rest never comes
        V2_SIGNATURE + b"\x21\x11\xff\xff" + b"\x00" * 60_000,  # oversized
        V2_SIGNATURE[:6],  # a beginning, then nothing
    ],
)
def test_bad_headers_close_the_connection_within_the_header_timeout(server: Server, header: bytes) -> None:
    with connect(server, PROXY, header) as sock:
        assert closed_by_server(sock)


def test_a_slow_header_is_closed_within_the_header_timeout(server: Server) -> None:
    with connect(server, PROXY) as sock:
        deadline = time.monotonic() + CLOSED_WITHIN
        try:
            for byte in v1("203.0.113.14"):
                sock.sendall(bytes([byte]))
                time.sleep(0.2)
                assert time.monotonic() < deadline, "the server kept a slow header open"
        except (BrokenPipeError, ConnectionResetError):
            pass
        else:
            raise AssertionError("the slow header was read to its end")


def test_three_hundred_bad_headers_leave_memory_as_it_was_and_are_counted(server: Server) -> None:
    pid = worker_pid(server)
    before = metric(server, "km_connections_refused_total", 'reason="proxy_header"')
    _, peak_before = memory_mb(pid)
    oversized = V2_SIGNATURE + b"\x21\x11\x10\x00" + b"\x00" * 64_000
    for n in range(300):
        header = oversized if n % 3 else b"PROXY GARBAGE " + b"x" * 90 + b"\r\n"
        with contextlib.suppress(ConnectionError), connect(server, PROXY, header) as sock:
            closed_by_server(sock)
    _, peak_after = memory_mb(pid)
    assert peak_after - peak_before <= 20, (peak_before, peak_after)
    assert metric(server, "km_connections_refused_total", 'reason="proxy_header"') >= before + 300


# -- behind the real HAProxy, from deploy/haproxy.cfg ---------------------------------------------
def haproxy_config(port: int, replica: int) -> str:
    """``deploy/haproxy.cfg`` as ``bench.scaleout`` derives it for this machine (both servers: ``replica``)."""
    code = f"from bench.scaleout import haproxy_config; print(haproxy_config({port}, [{replica}, {replica}]), end='')"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "send-proxy-v2" in done.stdout and f"source {PROXY}" in done.stdout
    return done.stdout


@contextlib.contextmanager
def haproxy(home: Path, server: Server) -> Iterator[str]:
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    port = free_port()
    config = home / "haproxy.cfg"
    checks_often = haproxy_config(port, port_of(server.url)).replace(" inter 5s ", " inter 200ms ")
    assert " inter 200ms " in checks_often
    config.write_text(checks_often)  # a failing health check shows within a second
    log = home / "haproxy.log"
    with log.open("ab") as out:
        process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=out, stderr=out)
    try:
        url = f"https://127.0.0.1:{port}"
        wait_ready(url, server.ca, process, log)
        yield url
        time.sleep(1.5)  # 7 health checks, each with its PROXY header; 3 failed ones mark a server DOWN
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert "is DOWN" not in log.read_text(), log.read_text()[-2000:]


def client_from(server: Server, url: str, address: str, token: str) -> httpx.Client:
    context = ssl.create_default_context(cafile=str(server.ca))
    transport = httpx.HTTPTransport(verify=context, local_address=address)
    return httpx.Client(base_url=url, transport=transport, headers={"Authorization": token}, timeout=30)


def test_behind_haproxy_each_client_has_its_own_address_and_bucket(server: Server, tmp_path: Path) -> None:
    with haproxy(tmp_path, server) as url:
        with client_from(server, url, "127.0.0.2", BAD) as first, client_from(server, url, "127.0.0.3", BAD) as second:
            first_answers = [first.get("/v1/keys").status_code for _ in range(4)]
            second_answer = second.get("/v1/keys").status_code
        with client_from(server, url, "127.0.0.4", f"Bearer {server.admin_token}") as admin:
            records: list[dict[str, Any]] = admin.get("/v1/audit", params={"limit": 1000}).json()["records"]
    assert first_answers == [401, 401, 401, 429]
    assert second_answer == 401  # its own bucket: 127.0.0.2's failures do not count against it
    clients = {r["client"] for r in records if r["action"] == "auth.failed"}
    assert {"127.0.0.2", "127.0.0.3"} <= clients
    assert PROXY not in clients


# -- a balancer that terminates TLS: X-Forwarded-For ----------------------------------------------
@pytest.mark.own_server
def test_forwarding_headers_are_believed_from_the_trusted_address_only(tmp_path: Path) -> None:
    settings = {"KM_TRUSTED_PROXIES": f"{PROXY}/32", "KM_PROXY_PROTOCOL": "false"}
    with running_server(tmp_path, workers=1, **settings) as server:
        forwarded = {"X-Forwarded-For": "6.6.6.6, 203.0.113.30", "Authorization": BAD}
        with client_from(server, server.url, PROXY, BAD) as balancer:
            assert balancer.get("/v1/keys", headers=forwarded).status_code == 401
        with client_from(server, server.url, "127.0.0.15", BAD) as stranger:
            assert stranger.get("/v1/keys", headers={"X-Forwarded-For": "203.0.113.31"}).status_code == 401
        assert get(server, PROXY, b"", BAD) == 401  # no PROXY header is expected of it
        clients = failure_clients(server)
    assert "203.0.113.30" in clients and "127.0.0.15" in clients
    assert "203.0.113.31" not in clients and "6.6.6.6" not in clients
