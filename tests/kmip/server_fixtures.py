"""A real ``keymanager serve`` with KMIP on a free port, principals bound to client certificates
made with ``keymanager dev-cert``, and PyKMIP's ``ProxyKmipClient`` connected to it over mTLS.

The test modules ``tests/kmip/test_server_*.py`` import ``kmip_server`` from here: each module's
copy of the fixture hands out the one server of ``tests/kmip/conftest.py`` (``kmip_door_server``:
two workers, the settings ``OURS`` there, among them a header deadline of 2 s), whose principals
are made once for the run.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kmip.core import enums, utils
from kmip.core.messages import contents, messages
from kmip.pie.client import ProxyKmipClient

from tests.e2e.conftest import Server, keymanager

OWNER = "kmip-owner"
"""An app given ``create_keys``: it creates keys and owns them."""
STRANGER = "kmip-stranger"
"""An app without ``create_keys``, named on no key."""
AUDITOR = "kmip-auditor"
KEY_STORE = "kmip-key-store"
"""An app given ``create_keys`` and ``key_store``: a KMIP key-store client, whose AES keys it may Get."""


@dataclass(frozen=True)
class KmipServer:
    """The spawned server, its KMIP port, and the client certificate of each principal."""

    server: Server
    port: int
    certs: dict[str, tuple[Path, Path]]
    config: Path
    """An empty PyKMIP client configuration (none of ``/etc/pykmip`` is read)."""

    def client(self, name: str, **options: Any) -> ProxyKmipClient:
        """An open ``ProxyKmipClient`` for principal ``name`` (close it: use :meth:`connected`)."""
        cert, key = self.certs[name]
        client = ProxyKmipClient(
            hostname="127.0.0.1",
            port=self.port,
            cert=str(cert),
            key=str(key),
            ca=str(self.server.ca),
            config_file=str(self.config),
            **options,
        )
        client.open()
        return client

    @contextlib.contextmanager
    def connected(self, name: str, **options: Any) -> Iterator[ProxyKmipClient]:
        client = self.client(name, **options)
        try:
            yield client
        finally:
            client.close()

    def tls(self, name: str | None) -> ssl.SSLSocket:
        """A raw TLS connection to the KMIP port, with principal ``name``'s certificate (None: none)."""
        context = ssl.create_default_context(cafile=str(self.server.ca))
        context.check_hostname = False
        if name is not None:
            context.load_cert_chain(*(str(p) for p in self.certs[name]))
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return context.wrap_socket(raw)

    def admin(self) -> httpx.Client:
        return self.server.client(self.server.admin_token)

    def audit(self, action: str) -> list[dict[str, Any]]:
        """The newest 1,000 audit records of ``action``, oldest first, as an admin reads them (the
        server is shared by every KMIP test: the run's first 1,000 records may hold none of a test's)."""
        with self.admin() as admin:
            found = admin.get("/v1/audit", params={"action": action, "order": "desc", "limit": 1000}).json()
        records = found["records"] if isinstance(found, dict) else found
        return [r for r in reversed(records) if r["action"] == action]


def _principal(
    server: Server, home: Path, name: str, role: str, create_keys: bool, key_store: bool = False
) -> tuple[Path, Path]:
    made = keymanager("dev-cert", name, "--out", str(home / "certs"), env=server.env, cwd=home)
    assert made.returncode == 0, made.stderr
    subject = next(line.split(":", 1)[1].strip() for line in made.stdout.splitlines() if line.startswith("subject:"))
    with server.client(server.admin_token) as admin:
        body = {"name": name, "role": role, "cert_subject": subject, "create_keys": create_keys, "key_store": key_store}
        answer = admin.post("/v1/principals", json=body)
        assert answer.status_code == 201, answer.text
    return home / "certs" / f"client-{name}.pem", home / "certs" / f"client-{name}-key.pem"


PRINCIPALS = {
    OWNER: ("app", True),
    STRANGER: ("app", False),
    AUDITOR: ("auditor", False),
    "kmip-admin": ("admin", False),
    KEY_STORE: ("app", True, True),
}
"""Each principal of :func:`with_principals`: its role, whether it may create keys (and is a key store)."""


def with_principals(server: Server, port: int, home: Path, names: Iterable[str] = PRINCIPALS) -> KmipServer:
    """The spawned ``server`` (KMIP on ``port``, its home ``home``) with the principals ``names`` of
    :data:`PRINCIPALS` made (all of them unless told), each bound to a certificate of its own."""
    certs = {name: _principal(server, home, name, *PRINCIPALS[name]) for name in names}
    config = home / "pykmip.conf"
    config.write_text("[client]\n")
    return KmipServer(server, port, certs, config)


def unbound(kmip_server: KmipServer, name: str) -> KmipServer:
    """``kmip_server`` with one more certificate, ``name``'s, from the server's CA but bound to no principal."""
    home = kmip_server.server.var_dir.parent
    made = keymanager("dev-cert", name, "--out", str(home / "certs"), env=kmip_server.server.env, cwd=home)
    assert made.returncode == 0, made.stderr
    certs = {
        **kmip_server.certs,
        name: (home / "certs" / f"client-{name}.pem", home / "certs" / f"client-{name}-key.pem"),
    }
    return KmipServer(kmip_server.server, kmip_server.port, certs, kmip_server.config)


@pytest.fixture(scope="session")
def kmip_server(kmip_door_server: KmipServer) -> KmipServer:
    """The run's spawned server with KMIP on and its principals (see :func:`with_principals`);
    every module importing this fixture gets the same one."""
    return kmip_door_server


def request_message(
    items: list[tuple[enums.Operation, Any]],
    version: tuple[int, int] = (1, 2),
    *,
    continue_on_error: bool = False,
) -> bytes:
    """The TTLV of a request message with a batch item per ``(operation, payload)`` (ids ``0``, ``1``, …)."""
    header = messages.RequestHeader(
        protocol_version=contents.ProtocolVersion(*version),
        batch_count=contents.BatchCount(len(items)),
        batch_error_cont_option=messages.BatchErrorContinuationOption(enums.BatchErrorContinuationOption.CONTINUE)
        if continue_on_error
        else None,
    )
    batch = [
        messages.RequestBatchItem(
            operation=contents.Operation(operation),
            unique_batch_item_id=contents.UniqueBatchItemID(str(n).encode()) if len(items) > 1 else None,
            request_payload=payload,
        )
        for n, (operation, payload) in enumerate(items)
    ]
    stream = utils.BytearrayStream()
    kmip_version = contents.protocol_version_to_kmip_version(contents.ProtocolVersion(*version))
    messages.RequestMessage(request_header=header, batch_items=batch).write(stream, kmip_version=kmip_version)
    return bytes(stream.buffer)


def read_response(connection: ssl.SSLSocket) -> messages.ResponseMessage:
    """The next response message on ``connection``."""
    data = read_exactly(connection, 8)
    data += read_exactly(connection, int.from_bytes(data[4:8], "big"))
    response = messages.ResponseMessage()
    response.read(utils.BytearrayStream(data))
    return response


def closed(connection: ssl.SSLSocket) -> bool:
    """Whether the server closed ``connection`` (it reads the end, or a reset) before the socket's timeout."""
    try:
        return connection.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


def read_exactly(connection: ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def foreign_certificate(directory: Path) -> tuple[Path, Path]:
    """A client certificate for ``CN=kmip-owner,O=keymanager`` issued by a CA the server does not trust."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "another CA")])
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "keymanager"), x509.NameAttribute(NameOID.COMMON_NAME, OWNER)]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / "foreign.pem", directory / "foreign-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def create_aes(
    server: KmipServer, identity: str, bits: int = 256, mode: enums.BlockCipherMode | None = enums.BlockCipherMode.GCM
) -> str:
    """The unique identifier of a new, activated AES key of ``identity`` whose Create names ``mode`` in
    its Cryptographic Parameters (GCM: an ``AES_*_GCM`` key; None: none named, a raw ``AES_*_CBC_PAD``
    key), as PyKMIP's ``ProxyKmipClient.create`` cannot say."""
    from kmip.core import objects
    from kmip.core.factories.attributes import AttributeFactory
    from kmip.core.messages import payloads

    made = AttributeFactory()
    template = [
        made.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_ALGORITHM, enums.CryptographicAlgorithm.AES),
        made.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_LENGTH, bits),
        made.create_attribute(
            enums.AttributeType.CRYPTOGRAPHIC_USAGE_MASK,
            [enums.CryptographicUsageMask.ENCRYPT, enums.CryptographicUsageMask.DECRYPT],
        ),
    ]
    if mode is not None:
        parameters = {"block_cipher_mode": mode}
        template.append(made.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_PARAMETERS, parameters))
    create = payloads.CreateRequestPayload(
        object_type=enums.ObjectType.SYMMETRIC_KEY, template_attribute=objects.TemplateAttribute(attributes=template)
    )
    with server.tls(identity) as raw:
        raw.sendall(request_message([(enums.Operation.CREATE, create)]))
        item = read_response(raw).batch_items[0]
    assert item.result_status.value == enums.ResultStatus.SUCCESS, item.result_message
    uid = str(item.response_payload.unique_identifier)
    with server.connected(identity) as client:
        client.activate(uid)
    return uid
