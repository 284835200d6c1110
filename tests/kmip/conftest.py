"""One real KMIP server for every KMIP test of the run, and principals bound to client certificates.

``kmip_server`` is ``keymanager init`` then ``keymanager serve`` (two workers, SoftHSM, SQLite) with
KMIP on (``KM_KMIP_PORT``) beside HTTPS: TLS with the service's certificate, client certificates
required from the development CA. ``KmipServer.principal(name)`` issues a client certificate with
``keymanager dev-cert NAME`` and creates the principal whose ``cert_subject`` is its subject, so a
KMIP client presenting it is that principal. ``KmipServer.pykmip_conf`` writes the client section
PyKMIP's clients read (``KMIPProxy`` and ``ProxyKmipClient``, ``config=<section>``).

The same server is the one behind ``server_fixtures.py``'s ``kmip_server`` (``kmip_door_server``
below, with that module's principals): ``tests/kmip`` starts one server.

With ``KM_TEST_KMIP_REFERENCE=pykmip`` the same fixture is PyKMIP's own server (``pykmip-server``,
configured in a temporary directory with certificates from a development CA made as ``keymanager
init`` makes it), to tell a fault of the harness from a fault of ours; ``server_fixtures.py``'s
tests still run against ours, which then starts for them.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import Server, free_port, keymanager, server_env
from tests.kmip import server_fixtures
from tests.support.server_pool import ServerPool

HOST = "127.0.0.1"
REFERENCE = os.environ.get("KM_TEST_KMIP_REFERENCE") == "pykmip"
"""Run the KMIP tests against PyKMIP's own server instead of ours."""


@dataclass(frozen=True)
class Identity:
    """A client certificate issued by ``keymanager dev-cert`` and the subject bound to its principal."""

    name: str
    cert: Path
    key: Path
    subject: str


@dataclass(frozen=True)
class KmipServer:
    """A KMIP endpoint over mTLS at ``host:port`` whose certificate ``ca`` verifies; ``https`` is the
    same service's REST side (``None`` for PyKMIP's reference server, which has none)."""

    host: str
    port: int
    ca: Path
    home: Path
    env: dict[str, str]
    https: Server | None

    @property
    def endpoint(self) -> str:
        """``host:port``, as libmongocrypt's ``kmip.endpoint`` takes it."""
        return f"{self.host}:{self.port}"

    def principal(self, name: str, role: str = "app", **fields: object) -> Identity:
        """A certificate for ``CN=name`` from ``keymanager dev-cert`` and, on our server, the principal
        ``name`` with ``role`` (and ``fields``, e.g. the right to create keys) bound to its subject."""
        identity = dev_cert(name, self.env, self.home)
        if self.https is not None:
            body = {"name": name, "role": role, "cert_subject": identity.subject, **fields}
            with self.https.client(self.https.admin_token) as admin:
                made = admin.post("/v1/principals", json=body)
            assert made.status_code == 201, made.text
        return identity

    def tls_context(self, identity: Identity) -> ssl.SSLContext:
        """A client context presenting ``identity``'s certificate and trusting the service's CA."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(identity.cert), str(identity.key))
        return context

    def pykmip_conf(self, identity: Identity, path: Path, section: str = "client") -> Path:
        """``path`` written as a PyKMIP client configuration with one ``section`` for ``identity``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"[{section}]\nhost={self.host}\nport={self.port}\n"
            f"certfile={identity.cert}\nkeyfile={identity.key}\nca_certs={self.ca}\n"
            "cert_reqs=CERT_REQUIRED\nssl_version=PROTOCOL_SSLv23\n"
            "do_handshake_on_connect=True\nsuppress_ragged_eofs=True\n"
        )
        return path


def dev_cert(name: str, env: dict[str, str], home: Path) -> Identity:
    """``keymanager dev-cert NAME`` in ``home`` (its var dir's development CA): the paths and subject it prints."""
    done = keymanager("dev-cert", name, env=env, cwd=home)
    assert done.returncode == 0, done.stderr

    def printed(label: str) -> str:
        found = re.search(rf"^{label}:\s+(.+)$", done.stdout, re.MULTILINE)
        assert found, done.stdout
        return found.group(1).strip()

    return Identity(name, Path(printed("client certificate")), Path(printed("its key")), printed("subject"))


def wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Return once ``HOST:port`` accepts a TCP connection; fail naming the log if it never does."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"KMIP server exited {process.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            return
        time.sleep(0.2)
    raise AssertionError(f"KMIP server not listening in 60 s: {log.read_text()[-2000:]}")


OURS = {
    "KM_MIN_PENDING_DAYS": "0",  # deletion without a waiting period
    "KM_AUTH_FAILURE_BURST": "10000",  # an authentication-failure burst the refusal tests never spend
    "KM_HEADER_TIMEOUT_SECONDS": "2",  # the deadline tests of test_server_bad_input.py wait for it
}
"""The settings of our KMIP server, on top of ``running_server``'s."""


REFERENCE_CONF = """[server]
hostname={host}
port={port}
certificate_path={tls}/server.pem
key_path={tls}/server-key.pem
ca_path={tls}/ca.pem
auth_suite=TLS1.2
enable_tls_client_auth=True
policy_path={home}/policies
database_path={home}/pykmip.db
"""


@contextlib.contextmanager
def reference_kmip_server(home: Path) -> Iterator[KmipServer]:
    """PyKMIP's ``pykmip-server`` on a free port, with the development CA's server certificate."""
    from keymanager.cli.tls import ensure_dev_pki

    env = server_env(home / "var")
    tls = home / "var" / "tls"
    ensure_dev_pki(tls, client_names=())
    (home / "policies").mkdir()
    port = free_port()
    conf = home / "server.conf"
    conf.write_text(REFERENCE_CONF.format(host=HOST, port=port, tls=tls, home=home))
    log = home / "pykmip-server.log"
    command = [sys.executable, "-W", "ignore", "-m", "kmip.services.server.server", "-f", str(conf), "-l", str(log)]
    with (home / "pykmip-server.out").open("wb") as out:
        process = subprocess.Popen(command, cwd=home, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, process, home / "pykmip-server.out")
        yield KmipServer(HOST, port, tls / "ca.pem", home, env, None)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def kmip_ours(server_pool: ServerPool) -> KmipServer:
    """Our KMIP server (the pool's server of the settings :data:`OURS` with KMIP on), started once for the run."""
    https = server_pool.get(kmip=True, **OURS)
    return KmipServer(HOST, int(https.env["KM_KMIP_PORT"]), https.ca, https.var_dir.parent, https.env, https)


@pytest.fixture(scope="session")
def kmip_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KmipServer]:
    """The run's one KMIP server (ours, or PyKMIP's with ``KM_TEST_KMIP_REFERENCE=pykmip``)."""
    if not REFERENCE:
        yield request.getfixturevalue("kmip_ours")
        return
    with reference_kmip_server(tmp_path_factory.mktemp("kmip-reference")) as started:
        yield started


@pytest.fixture(scope="session")
def kmip_door_server(kmip_ours: KmipServer) -> server_fixtures.KmipServer:
    """Our KMIP server as ``server_fixtures.py`` presents it, with its principals (made once)."""
    assert kmip_ours.https is not None
    return server_fixtures.with_principals(kmip_ours.https, kmip_ours.port, kmip_ours.home)
