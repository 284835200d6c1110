"""Two real replicas: ``keymanager serve`` A (one process) and B (``--workers 2``) on different
ports, sharing one throwaway PostgreSQL database and one SoftHSM token directory.

Every process runs the scheduled maintenance (rotation of due keys, the deletion sweeper)
every second. The test process never opens the servers' token in-process (SoftHSM reads
``SOFTHSM2_CONF`` once per process, and this process uses the test run's token): token
objects are listed by a short-lived child process pointed at ``var/softhsm2.conf``.
"""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import free_port, keymanager, server_env, wait_ready
from tests.support.postgres import create_database, drop_database

REPLICAS_PIN = "replicas-user-pin-41827"
TOKEN_LABEL = "km-replicas"
SOFTHSM_MODULE = "/usr/lib/softhsm/libsofthsm2.so"

_LIST_LABELS = """
import sys
import pkcs11
from pkcs11 import Attribute, ObjectClass

pin = sys.stdin.read().strip()
token = pkcs11.lib(sys.argv[1]).get_token(token_label=sys.argv[2])
with token.open(user_pin=pin) as session:
    for obj in session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY}):
        print(obj[Attribute.LABEL])
"""


@dataclass(frozen=True)
class Node:
    """One ``keymanager serve`` (its supervisor process when it has several workers)."""

    name: str
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    ca: Path

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        context = ssl.create_default_context(cafile=str(self.ca))
        return httpx.Client(base_url=self.url, verify=context, headers=headers, timeout=30)


@dataclass
class Cluster:
    home: Path
    var_dir: Path
    env: dict[str, str]
    database_url: str
    admin_token: str
    a: Node
    b: Node
    secrets: list[str] = field(default_factory=list)
    """Tokens and plaintexts handed to the servers: none may appear in their logs."""

    def admin(self, node: Node) -> httpx.Client:
        return node.client(self.admin_token)

    def token_labels(self) -> list[str]:
        """Labels of the secret keys in the servers' token, listed by a child process."""
        env = {**self.env, "SOFTHSM2_CONF": str(self.var_dir / "softhsm2.conf")}
        listed = subprocess.run(
            [sys.executable, "-c", _LIST_LABELS, SOFTHSM_MODULE, TOKEN_LABEL],
            input=REPLICAS_PIN,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        return sorted(listed.stdout.split())


def start_node(name: str, args: list[str], env: dict[str, str], home: Path) -> Node:
    port = free_port()
    log = home / f"server-{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "keymanager.cli.main", "serve", "--port", str(port), *args],
            env=env,
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Node(
        name=name,
        url=f"https://127.0.0.1:{port}",
        port=port,
        process=process,
        log=log,
        ca=home / "var" / "tls" / "ca.pem",
    )


def stop_node(node: Node) -> None:
    node.process.terminate()
    try:
        node.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        node.process.kill()
        node.process.wait(timeout=10)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("replicas")
    var_dir = home / "var"
    database_url = create_database()
    env = server_env(
        var_dir,
        KM_DATABASE_URL=database_url,
        KM_PKCS11_PIN=REPLICAS_PIN,
        KM_PKCS11_TOKEN_LABEL=TOKEN_LABEL,
        KM_MIN_PENDING_DAYS="0",
        KM_MAINTENANCE_INTERVAL_SECONDS="1",
    )
    assert "SOFTHSM2_CONF" not in env
    nodes: list[Node] = []
    try:
        init = keymanager("init", env=env, cwd=home)
        assert init.returncode == 0, init.stderr
        admin = (var_dir / "admin.token").read_text().strip()
        one_process = ["--workers", "1", "--log-level", "debug"]  # debug: maintenance rounds
        nodes.append(start_node("a", one_process, env, home))
        nodes.append(start_node("b", ["--workers", "2", "--log-level", "debug"], env, home))
        for node in nodes:
            wait_ready(node.url, node.ca, node.process, node.log)
        yield Cluster(
            home=home,
            var_dir=var_dir,
            env=env,
            database_url=database_url,
            admin_token=admin,
            a=nodes[0],
            b=nodes[1],
            secrets=[REPLICAS_PIN, admin],
        )
    finally:
        for node in nodes:
            stop_node(node)
        drop_database(database_url)


# -- B's worker processes ------------------------------------------------------------


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(child) for child in text)
    return found


_TCP_ESTABLISHED = "01"


def established_peer_ports(pid: int, port: int) -> set[int]:
    """Remote ports of the established TCP connections to ``port`` held by process ``pid``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        match = re.fullmatch(r"socket:\[(\d+)\]", target)
        if match:
            inodes.add(match.group(1))
    peers = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
        if inode in inodes and state == _TCP_ESTABLISHED and int(local.split(":")[1], 16) == port:
            peers.add(int(remote.split(":")[1], 16))
    return peers
