"""``deploy/haproxy.cfg`` run by the real HAProxy in front of a real server, both of its doors'
ports: HTTPS (REST, the AWS KMS API, XKS) and KMIP, each client named in a PROXY v2 header (every
listener of a worker reads it: ``serving/protocol.py`` fronts each server of the worker's loop,
the KMIP listener's included), the KMIP backend checked on the replica's ``/v1/ready``. The
addresses are this machine's, rewritten as ``bench.scaleout`` does."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kmip import enums
from kmip.core import objects
from kmip.core.factories.attributes import AttributeFactory
from kmip.core.messages import payloads

from tests.deploy.support import REPO
from tests.e2e.conftest import Server, free_port, running_server, wait_ready
from tests.kmip.server_fixtures import OWNER, KmipServer, read_response, request_message, with_principals

CLIENT = "127.0.0.2"
_ATTRIBUTES = AttributeFactory()
PROXY_SOURCE = "127.0.0.9"
"""The address HAProxy connects from (``bench.scaleout.PROXY_SOURCE``), the one the replica trusts."""


def haproxy_config(port: int, https: int, kmip: tuple[int, int]) -> str:
    """``bench.scaleout.haproxy_config`` (in a process of its own: ``tests/bench`` shadows the ``bench``
    package here), both servers of each backend the one replica."""
    code = (
        "from bench.scaleout import haproxy_config; "
        f"print(haproxy_config({port}, [{https}, {https}], ({kmip[0]}, [{kmip[1]}, {kmip[1]}])), end='')"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"source {PROXY_SOURCE}" in done.stdout and "frontend keymanager_kmip" in done.stdout
    return done.stdout


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, int]]:
    """A server with KMIP on, trusting HAProxy's source address to send the PROXY header: it and its KMIP port."""
    kmip_port = free_port()
    home = tmp_path_factory.mktemp("replica")
    settings = {"KM_KMIP_PORT": str(kmip_port), "KM_TRUSTED_PROXIES": f"{PROXY_SOURCE}/32"}
    with running_server(home, **settings) as server:
        yield server, kmip_port


@contextlib.contextmanager
def haproxy(home: Path, server: Server, kmip_port: int) -> Iterator[tuple[str, int]]:
    """HAProxy from ``deploy/haproxy.cfg`` in front of ``server`` (both servers of each backend are
    it): the HTTPS URL and the KMIP port; its log is checked for servers marked down."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    https_port, kmip_front = free_port(), free_port()
    https = int(server.url.rpartition(":")[2])
    config = haproxy_config(https_port, https, (kmip_front, kmip_port))
    (home / "haproxy.cfg").write_text(config.replace(" inter 5s ", " inter 200ms "))
    check = subprocess.run([binary, "-c", "-f", str(home / "haproxy.cfg")], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    log = home / "haproxy.log"
    with log.open("ab") as out:
        process = subprocess.Popen([binary, "-db", "-f", str(home / "haproxy.cfg")], stdout=out, stderr=out)
    try:
        url = f"https://127.0.0.1:{https_port}"
        wait_ready(url, server.ca, process, log)
        yield url, kmip_front
        time.sleep(1)  # five health checks of each server, on each backend
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert "is DOWN" not in log.read_text(), log.read_text()[-2000:]


def audit(server: Server, action: str) -> list[dict[str, Any]]:
    with server.client(server.admin_token) as admin:
        found = admin.get("/v1/audit", params={"action": action, "order": "desc", "limit": 100}).json()
    return list(found["records"] if isinstance(found, dict) else found)


def kmip_create(kmip: KmipServer, port: int, source: str) -> str:
    """A KMIP Create of an AES-256 key by :data:`OWNER` over TLS to ``port``, connecting from ``source``: its id."""
    template = objects.TemplateAttribute(
        attributes=[
            _ATTRIBUTES.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_ALGORITHM, enums.CryptographicAlgorithm.AES),
            _ATTRIBUTES.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_LENGTH, 256),
            _ATTRIBUTES.create_attribute(
                enums.AttributeType.CRYPTOGRAPHIC_USAGE_MASK, [enums.CryptographicUsageMask.ENCRYPT]
            ),
        ]
    )
    create = payloads.CreateRequestPayload(object_type=enums.ObjectType.SYMMETRIC_KEY, template_attribute=template)
    context = ssl.create_default_context(cafile=str(kmip.server.ca))
    context.load_cert_chain(*(str(path) for path in kmip.certs[OWNER]))
    raw = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as connection:
        connection.sendall(request_message([(enums.Operation.CREATE, create)]))
        (item,) = read_response(connection).batch_items
    assert item.result_status.value == enums.ResultStatus.SUCCESS, item.result_reason
    return str(item.response_payload.unique_identifier)


@pytest.fixture(scope="module")
def kmip(replica: tuple[Server, int]) -> KmipServer:
    """The replica's KMIP side, with :data:`OWNER` (an app that may create keys) bound to a certificate."""
    server, kmip_port = replica
    return with_principals(server, kmip_port, server.var_dir.parent, names=[OWNER])


def test_both_doors_through_the_deployed_haproxy(kmip: KmipServer, tmp_path: Path) -> None:
    server, kmip_port = kmip.server, kmip.port
    with haproxy(tmp_path, server, kmip_port) as (url, kmip_front):
        context = ssl.create_default_context(cafile=str(server.ca))
        transport = httpx.HTTPTransport(verify=context, local_address=CLIENT)
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        with httpx.Client(base_url=url, transport=transport, headers=headers, timeout=30) as admin:
            made = admin.post("/v1/keys", json={"name": "through-haproxy", "policy": {"encrypt": [OWNER]}})
            assert made.status_code == 201, made.text
        uid = kmip_create(kmip, kmip_front, CLIENT)
        via_pykmip = KmipServer(kmip.server, kmip_front, kmip.certs, kmip.config)
        with via_pykmip.connected(OWNER) as client:  # PyKMIP's own client, through HAProxy
            assert client.get_attribute_list(uid)
    created = next(r for r in audit(server, "key.create") if r["key_id"] == made.json()["id"])
    assert created["client"] == CLIENT  # named by HAProxy's PROXY header
    kmip_created = next(r for r in audit(server, "kmip.Create") if r["key_id"] == uid)
    assert kmip_created["client"] == CLIENT  # on the KMIP port too


def test_a_trusted_address_must_send_the_header_on_kmip_too(kmip: KmipServer) -> None:
    with pytest.raises(OSError):  # (ssl.SSLError and ConnectionError are OSErrors)
        kmip_create(kmip, kmip.port, PROXY_SOURCE)  # HAProxy's address, no PROXY header: refused
    assert kmip_create(kmip, kmip.port, "127.0.0.1")  # any other address, without one: served
