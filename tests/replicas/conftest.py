"""Two real replicas: ``keymanager serve`` A (one process) and B (``--workers 2``) on different
ports, sharing one throwaway PostgreSQL database and one SoftHSM token directory.

Every process runs the scheduled maintenance (rotation of due keys, the deletion sweeper)
every second. The test process never opens the servers' token in-process (SoftHSM reads
``SOFTHSM2_CONF`` once per process, and this process uses the test run's token): token
objects are listed by a short-lived child process pointed at ``var/softhsm2.conf``.
"""

from __future__ import annotations

import base64
import contextlib
import re
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


# -- one node on a database of the test's choice, and load that remembers what was acknowledged ----


@dataclass
class Installation:
    """``keymanager init`` in ``home`` on ``database_url``: its environment and first admin's token."""

    home: Path
    env: dict[str, str]
    admin_token: str


def install(home: Path, database_url: str, **settings: str) -> Installation:
    """Initialise an installation of its own (var dir, SoftHSM token) on ``database_url``."""
    env = server_env(home / "var", KM_DATABASE_URL=database_url, **settings)
    init = keymanager("init", env=env, cwd=home)
    assert init.returncode == 0, init.stderr
    return Installation(home, env, (home / "var" / "admin.token").read_text().strip())


@contextlib.contextmanager
def running(installation: Installation, name: str, *args: str, env: dict[str, str] | None = None) -> Iterator[Node]:
    """``keymanager serve`` of ``installation`` (``env``: its environment instead), ready, until the block ends."""
    node = start_node(name, list(args), env or installation.env, installation.home)
    try:
        wait_ready(node.url, node.ca, node.process, node.log)
        yield node
    finally:
        stop_node(node)


class Load:
    """Threads encrypting through ``node`` until stopped, each on its own connections; remembers
    the request id of every acknowledged (200) answer and counts the others."""

    def __init__(self, nodes: list[Node], token: str, key: str, threads: int = 6) -> None:
        self._nodes, self._token, self._key = nodes, token, key
        self.acknowledged: list[str] = []
        self.refused: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(threads)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def wait_for(self, acknowledged: int, timeout: float = 60) -> None:
        """Return once ``acknowledged`` answers in all were acknowledged."""
        deadline = time.monotonic() + timeout
        while len(self.acknowledged) < acknowledged:
            assert time.monotonic() < deadline, f"only {len(self.acknowledged)} acknowledged, {self.refused}"
            time.sleep(0.05)

    def _run(self, index: int) -> None:
        node = self._nodes[index % len(self._nodes)]
        body = {"plaintext": base64.b64encode(b"load-" + str(index).encode()).decode()}
        while not self._stop.is_set():
            try:
                with node.client(self._token) as client:
                    for _ in range(20):
                        answer = client.post(f"/v1/keys/{self._key}/encrypt", json=body)
                        with self._lock:
                            if answer.status_code == 200:
                                self.acknowledged.append(answer.headers["x-request-id"])
                            else:
                                self.refused[answer.status_code] += 1
                        if self._stop.is_set():
                            return
            except httpx.HTTPError:
                with self._lock:
                    self.refused[0] += 1  # no answer at all (a connection cut by a dying worker)
                time.sleep(0.05)


def app_and_key(node: Node, admin_token: str, key: str = "faulty") -> str:
    """Make an application principal and ``key`` it may use; the principal's token."""
    with node.client(admin_token) as admin:
        made = admin.post("/v1/principals", json={"name": f"app-{key}", "role": "app"})
        assert made.status_code == 201, made.text
        policy = {"encrypt": [f"app-{key}"], "decrypt": [f"app-{key}"]}
        created = admin.post("/v1/keys", json={"name": key, "policy": policy})
        assert created.status_code == 201, created.text
    return str(made.json()["token"])


def audited_request_ids(node: Node, admin_token: str, action: str = "key.encrypt") -> set[str]:
    """The request ids of every audit record of ``action`` (paging with ``after``)."""
    found: set[str] = set()
    after = 0
    with node.client(admin_token) as admin:
        while True:
            page = admin.get("/v1/audit", params={"action": action, "after": after, "limit": 1000})
            assert page.status_code == 200, page.text
            body = page.json()
            found.update(r["request_id"] for r in body["records"])
            if body["next"] is None:
                return found
            after = body["next"]


def verified(node: Node, admin_token: str) -> dict[str, Any]:
    """``GET /v1/audit/verify``'s answer."""
    with node.client(admin_token) as admin:
        answer = admin.get("/v1/audit/verify")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())
