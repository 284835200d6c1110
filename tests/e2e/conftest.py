"""A real ``keymanager`` installation: ``keymanager init`` then ``keymanager serve`` over TLS.

The server runs as a subprocess with its own var dir (its own SoftHSM token directory, SQLite
file, development CA) and two workers, with client certificates accepted from the dev CA. The
session's ``server`` (in ``tests/conftest.py``, shared with ``tests/sdk`` and ``tests/security``) is one.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import ON_SOFTHSM, TEST_PIN, TEST_PKCS11_MODULE, TEST_TOKEN_LABEL

ROOT = Path(__file__).resolve().parents[2]
E2E_PIN = "e2e-user-pin-60331"


@dataclass(frozen=True)
class Server:
    url: str
    var_dir: Path
    ca: Path
    admin_token: str
    log: Path
    env: dict[str, str]
    pid: int

    def worker_pids(self) -> list[int]:
        """The worker processes of ``keymanager serve --workers N`` (children running the app)."""
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
        return [int(c) for c in children if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()]

    def client(self, token: str | None = None, cert: tuple[str, str] | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert is not None:
            context.load_cert_chain(*cert)
        return httpx.Client(base_url=self.url, verify=context, headers=headers, timeout=30)

    def supported(self) -> list[str]:
        """The features (algorithms, internal uses) the server's token supports, as
        ``GET /v1/health?detail=true`` lists them."""
        with self.client() as anyone:
            anyone.get("/v1/ready")  # the answering worker's session is open: its capabilities are read
            supported: list[str] = anyone.get("/v1/health", params={"detail": "true"}).json()["hsm"]["supported"]
        return supported


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a keymanager process: the caller's, less the test run's SoftHSM setup (its own
    SoftHSM token under ``var_dir``; under ``make test-hsm`` the token under test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KM_") and k != "SOFTHSM2_CONF"}
    env.update(
        KM_VAR_DIR=str(var_dir),
        KM_PKCS11_PIN=E2E_PIN,
        KM_PKCS11_TOKEN_LABEL="km-e2e",
        KM_KMIP_PORT="0",  # KMIP off unless a test asks for it on a free port (5696 may be make run's)
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
    )
    if not ON_SOFTHSM:  # make test-hsm: the servers use the token under test
        env.update(KM_PKCS11_MODULE=TEST_PKCS11_MODULE, KM_PKCS11_TOKEN_LABEL=TEST_TOKEN_LABEL, KM_PKCS11_PIN=TEST_PIN)
    env.update(extra)
    return env


def keymanager(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "keymanager.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


READY_WITHIN = 180
"""Seconds a server may take to answer ``/v1/ready``: a few on a quiet machine, but a start-up costs
about 10 s of CPU (init, the master, two workers, the HSM probes), and on two cores shared with
other test runs that took more than 60 s of wall time."""


def wait_ready(url: str, ca: Path, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/v1/ready", verify=str(ca), timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"server not ready in {READY_WITHIN} s: {log.read_text()[-2000:]}")


def _workers(workers: int | None) -> list[str]:
    return [] if workers is None else ["--workers", str(workers)]


@contextlib.contextmanager
def running_server(
    home: Path, *, workers: int | None = 2, client_ca: bool = True, **extra_env: str
) -> Iterator[Server]:
    """``keymanager init`` then ``keymanager serve --workers N`` (``workers=None``: without
    ``--workers``) in ``home``, with ``extra_env`` (``KM_…`` settings) on top of the defaults;
    stopped when the block ends."""
    var_dir = home / "var"
    if client_ca:
        extra_env.setdefault("KM_TLS_CLIENT_CA", str(var_dir / "tls" / "ca.pem"))
    port = free_port()
    extra_env.setdefault("KM_PORT", str(port))  # init writes var/kmctl.toml for this port
    env = server_env(var_dir, **extra_env)
    init = keymanager("init", env=env, cwd=home)
    assert init.returncode == 0, init.stderr
    log = home / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "keymanager.cli.main", "serve", *_workers(workers), "--port", str(port)],
            env=env,
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"https://127.0.0.1:{port}"
    try:
        wait_ready(url, var_dir / "tls" / "ca.pem", process, log)
        admin = (var_dir / "admin.token").read_text().strip()
        yield Server(
            url=url,
            var_dir=var_dir,
            ca=var_dir / "tls" / "ca.pem",
            admin_token=admin,
            log=log,
            env=env,
            pid=process.pid,
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
