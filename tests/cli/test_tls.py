"""The development PKI: files, modes, idempotence, and real TLS handshakes with mutual authentication."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from keymanager.cli.tls import (
    DevPki,
    certificate_subject,
    ensure_dev_pki,
    issue_client_certificate,
)


@pytest.fixture
def pki(tmp_path: Path) -> DevPki:
    return ensure_dev_pki(tmp_path / "tls")


def _snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(directory.iterdir())}


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_creates_the_documented_files_with_safe_modes(pki: DevPki) -> None:
    assert sorted(p.name for p in pki.tls_dir.iterdir()) == [
        "ca-key.pem",
        "ca.pem",
        "client-billing-key.pem",
        "client-billing.pem",
        "server-key.pem",
        "server.pem",
    ]
    assert stat.S_IMODE(pki.tls_dir.stat().st_mode) == 0o700
    for key in (pki.ca_key, pki.server_key, pki.clients["billing"][1]):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert pki.clients == {"billing": (pki.tls_dir / "client-billing.pem", pki.tls_dir / "client-billing-key.pem")}


def test_certificate_contents(pki: DevPki) -> None:
    ca = _cert(pki.ca_cert)
    assert ca.subject.rfc4514_string() == "CN=keymanager development CA"
    basic = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert basic.critical and basic.value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    assert (ca.not_valid_after_utc - ca.not_valid_before_utc).days >= 3650

    server = _cert(pki.server_cert)
    server.verify_directly_issued_by(ca)
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]

    client = _cert(pki.clients["billing"][0])
    client.verify_directly_issued_by(ca)
    eku = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_second_call_changes_nothing(pki: DevPki) -> None:
    before = _snapshot(pki.tls_dir)
    assert ensure_dev_pki(pki.tls_dir) == pki
    assert _snapshot(pki.tls_dir) == before


def test_only_missing_parts_are_created(pki: DevPki) -> None:
    before = _snapshot(pki.tls_dir)
    again = ensure_dev_pki(pki.tls_dir, client_names=("billing", "support"))
    after = _snapshot(pki.tls_dir)
    assert {name: after[name] for name in before} == before
    assert set(after) - set(before) == {"client-support.pem", "client-support-key.pem"}
    assert certificate_subject(again.clients["support"][0].read_bytes()) == ("CN=support,O=keymanager")


def test_a_new_ca_reissues_server_and_client_certificates(pki: DevPki) -> None:
    pki.ca_key.unlink()
    ensure_dev_pki(pki.tls_dir)
    ca = _cert(pki.ca_cert)
    _cert(pki.server_cert).verify_directly_issued_by(ca)
    _cert(pki.clients["billing"][0]).verify_directly_issued_by(ca)
    assert stat.S_IMODE(pki.server_key.stat().st_mode) == 0o600


def test_a_server_key_that_does_not_match_is_replaced(pki: DevPki) -> None:
    pki.server_key.write_bytes(pki.clients["billing"][1].read_bytes())
    ensure_dev_pki(pki.tls_dir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)  # raises on a mismatch


def test_issue_client_certificate(pki: DevPki) -> None:
    cert, key = issue_client_certificate(pki.tls_dir, "support")
    assert (cert, key) == (
        pki.tls_dir / "client-support.pem",
        pki.tls_dir / "client-support-key.pem",
    )
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    _cert(cert).verify_directly_issued_by(_cert(pki.ca_cert))


@pytest.mark.parametrize("name", ["", "../evil", "a/b", "-x", "a" * 65, "a b"])
def test_bad_client_names_are_refused(pki: DevPki, name: str) -> None:
    with pytest.raises(ValueError, match="client name"):
        issue_client_certificate(pki.tls_dir, name)
    with pytest.raises(ValueError, match="client name"):
        ensure_dev_pki(pki.tls_dir, client_names=(name,))


def test_issue_client_certificate_needs_the_ca(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        issue_client_certificate(tmp_path, "billing")


def test_certificate_subject_accepts_pem_and_der(pki: DevPki) -> None:
    pem = pki.clients["billing"][0].read_bytes()
    der = x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)
    assert certificate_subject(pem) == "CN=billing,O=keymanager"
    assert certificate_subject(der) == "CN=billing,O=keymanager"
    with pytest.raises(ValueError):
        certificate_subject(b"not a certificate")


# --- real TLS handshakes ------------------------------------------------------------------


@dataclass
class _Server:
    """A TLS server on 127.0.0.1 that requires a client certificate from the development CA
    and records the subject of each client it accepted."""

    port: int
    subjects: list[str] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)


@pytest.fixture
def tls_server(pki: DevPki) -> Iterator[_Server]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.load_verify_locations(pki.ca_cert)
    context.verify_mode = ssl.CERT_REQUIRED

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    server = _Server(port=listener.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(5)
            try:
                with context.wrap_socket(raw, server_side=True) as conn:
                    peer = conn.getpeercert(binary_form=True)
                    assert peer is not None
                    server.subjects.append(certificate_subject(peer))
                    conn.sendall(b"ok")
            except (ssl.SSLError, OSError) as exc:
                server.errors.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server
    stop.set()
    thread.join(timeout=5)
    listener.close()


def _client_context(pki: DevPki, client: str | None = "billing") -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if client is not None:
        cert, key = pki.clients[client]
        context.load_cert_chain(cert, key)
    return context


def _exchange(context: ssl.SSLContext, port: int, server_hostname: str) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=server_hostname) as conn,
    ):
        return conn.recv(2)


@pytest.mark.parametrize("server_hostname", ["127.0.0.1", "localhost"])
def test_mutual_tls_handshake(pki: DevPki, tls_server: _Server, server_hostname: str) -> None:
    assert _exchange(_client_context(pki), tls_server.port, server_hostname) == b"ok"
    assert tls_server.subjects == ["CN=billing,O=keymanager"]


def test_the_client_refuses_a_name_not_in_the_server_certificate(pki: DevPki, tls_server: _Server) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _exchange(_client_context(pki), tls_server.port, "example.com")


def test_the_server_refuses_a_client_without_certificate(pki: DevPki, tls_server: _Server) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        # TLS 1.3 reports the refusal only when the client reads.
        _exchange(_client_context(pki, client=None), tls_server.port, "localhost")
    assert tls_server.subjects == []


def test_the_server_refuses_a_client_of_another_ca(pki: DevPki, tls_server: _Server, tmp_path: Path) -> None:
    other = ensure_dev_pki(tmp_path / "other")
    context = _client_context(pki, client=None)
    context.load_cert_chain(*other.clients["billing"])
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _exchange(context, tls_server.port, "localhost")
    assert tls_server.subjects == []
