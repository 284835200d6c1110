"""The image's health check script against a local HTTPS server (no Docker needed)."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from keymanager.cli.tls import ensure_dev_pki
from tests.deploy.support import HEALTHCHECK_SCRIPT


class _Server:
    def __init__(self, tls_dir: Path) -> None:
        self.status = 200
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.paths.append(self.path)
                body = b'{"status": "ok", "hsm": "ok", "database": "ok"}'
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        pki = ensure_dev_pki(tls_dir)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    running = _Server(tmp_path / "tls")
    yield running
    running.close()


def _check(port: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KM_")}
    env["KM_PORT"] = str(port)
    return subprocess.run(
        [sys.executable, "-I", str(HEALTHCHECK_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_healthy_when_ready_answers_200(server: _Server) -> None:
    result = _check(server.port)
    assert result.returncode == 0, result.stderr
    assert server.paths == ["/v1/ready"]


def test_unhealthy_when_ready_answers_503(server: _Server) -> None:
    server.status = 503
    result = _check(server.port)
    assert result.returncode == 1
    assert "503" in result.stderr


def test_unhealthy_when_nothing_listens() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = _check(port)
    assert result.returncode == 1
    assert "unhealthy" in result.stderr


def test_uses_only_the_standard_library() -> None:
    """The image's health check must not depend on the venv's packages (it runs `python`)."""
    source = HEALTHCHECK_SCRIPT.read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= set(sys.stdlib_module_names) | {"__future__"}, imports
