"""``keymanager serve`` refuses to start, naming the port, when another process holds its HTTPS or
KMIP port (issue 41, item 7: each worker bound KMIP with ``SO_REUSEPORT``, so a second
installation on the host silently took a share of the first one's KMIP connections, and a held
HTTPS port let ``serve`` announce the other process's readiness as its own). Real processes,
real sockets."""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, keymanager, running_server, server_env


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("ports")
    done = keymanager("init", env=server_env(home / "var"), cwd=home)
    assert done.returncode == 0, done.stderr
    return home


@contextlib.contextmanager
def held(port: int, *, reuse_port: bool) -> Iterator[socket.socket]:
    """Another process's listener on 127.0.0.1:``port`` (``reuse_port``: as every worker of an older
    installation bound KMIP)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    try:
        yield sock
    finally:
        sock.close()


def serve(home: Path, port: int, kmip_port: int) -> tuple[int, str]:
    env = server_env(home / "var", KM_KMIP_PORT=str(kmip_port))
    done = keymanager("serve", "--workers", "2", "--port", str(port), env=env, cwd=home)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("reuse_port", [False, True])
def test_a_held_kmip_port_stops_the_start_naming_it(home: Path, reuse_port: bool) -> None:
    kmip_port = free_port()
    with held(kmip_port, reuse_port=reuse_port):
        status, said = serve(home, free_port(), kmip_port)
    assert status == 1, said
    assert f"keymanager cannot start: the KMIP port {kmip_port} on 127.0.0.1 cannot be used" in said
    assert "another process is listening on it (KM_KMIP_PORT; 0 turns KMIP off)" in said
    assert "keymanager serving" not in said


def test_a_held_https_port_stops_the_start_naming_it(home: Path) -> None:
    port = free_port()
    with held(port, reuse_port=False):
        status, said = serve(home, port, 0)
    assert status == 1, said
    assert f"keymanager cannot start: the HTTPS port {port} on 127.0.0.1 cannot be used" in said
    assert "keymanager serving" not in said


def test_a_second_installation_cannot_share_a_running_ones_kmip_port(tmp_path: Path, home: Path) -> None:
    """The first serves KMIP on one socket its workers share; the second is refused, and every KMIP
    handshake still reaches the first (its CA, not the second's)."""
    kmip_port = free_port()
    with running_server(tmp_path, workers=2, KM_KMIP_PORT=str(kmip_port)) as first:
        status, said = serve(home, free_port(), kmip_port)
        assert status == 1, said
        assert f"the KMIP port {kmip_port}" in said
        context = ssl.create_default_context(cafile=str(first.ca))
        tls = first.var_dir / "tls"
        context.load_cert_chain(str(tls / "client-billing.pem"), str(tls / "client-billing-key.pem"))
        for _ in range(8):  # connections spread over both workers: each accepts on the one socket
            with (
                socket.create_connection(("127.0.0.1", kmip_port), timeout=30) as raw,
                context.wrap_socket(raw, server_hostname="127.0.0.1") as connected,
            ):
                assert connected.version() in ("TLSv1.2", "TLSv1.3")
