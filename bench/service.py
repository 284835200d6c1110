"""The keymanager under test: a running one (``--url``) or one spawned here on SoftHSM (``--spawn``).

A spawned service lives in a temporary directory: ``keymanager init`` then ``keymanager serve``
as subprocesses, on a free port, with the caller's environment less its ``KM_*`` settings and
``SOFTHSM2_CONF``. Either way the bench provisions its own app principal and key through the
SDK with an admin token, and hands clients an ``Endpoint``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import psutil
from keymanager_sdk import KeyManager, Policy

MTLS_SUBJECT = "CN=billing,O=keymanager"
READY_TIMEOUT = 90.0


@dataclass(frozen=True)
class Endpoint:
    """How a client reaches the service and which key it uses (picklable, for load processes)."""

    url: str
    key: str
    ca: str | None = None
    token: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    principal: str | None = None
    """The app principal the token belongs to (``provision``'s), for keys made later for it."""

    def client(self) -> KeyManager:
        """A new SDK client with its own keep-alive connection pool; retries off (errors are counted)."""
        return KeyManager(
            self.url,
            token=self.token,
            ca=self.ca,
            client_cert=self.client_cert,
            client_key=self.client_key,
            max_retries=0,
            timeout=300.0,
            insecure_http=self.url.startswith("http://"),  # bench transport's plain-HTTP mode
        )


@dataclass
class Service:
    """A service under test: its admin access, its process when spawned here, its var dir."""

    url: str
    ca: str | None
    admin_token: str
    pid: int | None = None
    var_dir: Path | None = None
    workers: int | None = None
    kmip_port: int | None = None
    """The KMIP listener's port (``KM_KMIP_PORT``) of a spawned service."""

    def pids(self) -> list[int]:
        """The server's processes (parent and children) when known, else an empty list."""
        if self.pid is None:
            return []
        try:
            parent = psutil.Process(self.pid)
            return [parent.pid, *(c.pid for c in parent.children(recursive=True))]
        except psutil.NoSuchProcess:
            return []

    def worker_pids(self) -> list[int]:
        """The processes that serve requests: the children of ``serve`` that are not helpers, or itself."""
        if self.pid is None:
            return []
        workers = []
        for child in psutil.Process(self.pid).children():
            try:
                if not any("resource_tracker" in part for part in child.cmdline()):
                    workers.append(child.pid)
            except psutil.NoSuchProcess:
                continue
        return workers or [self.pid]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def keymanager_command() -> list[str]:
    """How to run the ``keymanager`` command of this interpreter's environment."""
    script = Path(sys.executable).parent / "keymanager"
    return [str(script)] if script.exists() else [sys.executable, "-m", "keymanager.cli.main"]


def server_env(var_dir: Path, pin: str, **extra: str) -> dict[str, str]:
    """The environment of a spawned keymanager: ours, less ``KM_*`` and ``SOFTHSM2_CONF``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KM_") and k != "SOFTHSM2_CONF"}
    env.update(
        KM_VAR_DIR=str(var_dir),
        KM_PKCS11_PIN=pin,
        KM_PKCS11_TOKEN_LABEL="km-bench",  # noqa: S106 (a label, not a secret)
        KM_KMIP_PORT="0",  # no KMIP listener on the default port 5696, which another service may hold
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
    )
    env.update(extra)
    return env


def init_home(home: Path, settings: dict[str, str] | None = None) -> tuple[Path, str]:
    """Run ``keymanager init`` in ``home`` (``KM_*`` ``settings`` on top); its var dir and the SoftHSM user PIN."""
    var_dir = home / "var"
    pin = secrets.token_hex(8)
    done = subprocess.run(
        [*keymanager_command(), "init"],
        env=server_env(var_dir, pin, **(settings or {})),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"keymanager init failed: {done.stderr[-2000:]}")
    return var_dir, pin


def wait_ready(url: str, ca: str | None, process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait for ``/v1/ready`` to answer 200; raise with the log's tail when the server dies or stalls."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"keymanager serve exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/v1/ready", verify=ca or True, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"keymanager not ready in {READY_TIMEOUT:.0f} s: {log.read_text()[-2000:]}")


@contextmanager
def serve(
    home: Path, var_dir: Path, pin: str, workers: int, mode: str = "https", settings: dict[str, str] | None = None
) -> Iterator[Service]:
    """Serve the installation of ``home`` (mode ``https``, ``http`` or ``mtls``; ``KM_*`` ``settings``
    on top) until the block ends."""
    tls = var_dir / "tls"
    extra = {"KM_TLS_CLIENT_CA": str(tls / "ca.pem")} if mode == "mtls" else {}
    extra["KM_KMIP_PORT"] = str(free_port())
    extra.update(settings or {})
    args = ["serve", "--workers", str(workers), "--port", str(port := free_port())]
    if mode == "http":
        args.append("--insecure-http")
    log = home / f"server-{mode}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*keymanager_command(), *args], env=server_env(var_dir, pin, **extra), cwd=home, stdout=out, stderr=out
        )
    scheme = "http" if mode == "http" else "https"
    url, ca = f"{scheme}://127.0.0.1:{port}", str(tls / "ca.pem")
    try:
        wait_ready(url, ca, process, log)
        token = (var_dir / "admin.token").read_text().strip()
        kmip = int(extra["KM_KMIP_PORT"]) or None
        yield Service(url, ca, token, pid=process.pid, var_dir=var_dir, workers=workers, kmip_port=kmip)
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a spawned server and wait for it (kill after 20 s)."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def spawned(workers: int, mode: str = "https") -> Iterator[Service]:
    """A fresh installation in a temporary directory, served in ``mode``; removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="km-bench-"))
    try:
        var_dir, pin = init_home(home)
        with serve(home, var_dir, pin, workers, mode) as service:
            yield service
    finally:
        shutil.rmtree(home, ignore_errors=True)


def provision(service: Service, mtls: bool = False) -> Endpoint:
    """Create a bench principal and key (AES_256_CBC_HMAC_SHA256, the default; encrypt, decrypt,
    data keys and re-encryption granted to the principal); the app's endpoint.

    With ``mtls``, a second principal is bound to the development client certificate's subject
    (``CN=billing,O=keymanager``) and named by the key's policy too.
    """
    suffix = secrets.token_hex(4)
    principal, key = f"bench-{suffix}", f"bench-{suffix}"
    users: tuple[str, ...] = (principal, f"bench-mtls-{suffix}") if mtls else (principal,)
    plain = service.url.startswith("http://")  # bench transport's plain-HTTP mode
    with KeyManager(service.url, token=service.admin_token, ca=service.ca, insecure_http=plain) as admin:
        app = admin.create_principal(principal, "app")
        if mtls:
            admin.create_principal(users[1], "app", cert_subject=MTLS_SUBJECT)
        policy = Policy(encrypt=users, decrypt=users, generate_data_key=users, reencrypt=users)
        admin.create_key(key, policy=policy)
    return Endpoint(url=service.url, key=key, ca=service.ca, token=app.token, principal=principal)


def mtls_endpoint(endpoint: Endpoint, var_dir: Path) -> Endpoint:
    """The same key reached with the development client certificate instead of a token."""
    tls = var_dir / "tls"
    return replace(
        endpoint,
        token=None,
        client_cert=str(tls / "client-billing.pem"),
        client_key=str(tls / "client-billing-key.pem"),
    )
