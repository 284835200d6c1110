"""The development PKI: a local CA, the server certificate and client certificates for mTLS.

Layout of ``tls_dir`` (mode 0700; private keys 0600, certificates 0644, all PEM)::

    ca.pem, ca-key.pem                      keymanager development CA (EC P-256, 10 years)
    server.pem, server-key.pem              DNS:localhost, IP:127.0.0.1, IP:::1 (2 years)
    client-<name>.pem, client-<name>-key.pem  CN=<name>,O=keymanager, clientAuth (2 years)

Everything here is for development and tests; production brings its own certificates
(``KM_TLS_CERT``, ``KM_TLS_KEY``, ``KM_TLS_CLIENT_CA``).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_COMMON_NAME = "keymanager development CA"
ORGANIZATION = "keymanager"
SERVER_DNS_NAMES = ("localhost",)
SERVER_IP_ADDRESSES = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))

_CA_LIFETIME = datetime.timedelta(days=3650)
_LEAF_LIFETIME = datetime.timedelta(days=730)
_RENEW_BEFORE = datetime.timedelta(days=30)
_CLOCK_SKEW = datetime.timedelta(minutes=5)
_CLIENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

_PrivateKey = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class DevPki:
    """Paths of the development PKI files. ``clients`` maps a client name to (cert, key)."""

    tls_dir: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    clients: Mapping[str, tuple[Path, Path]]


def ensure_dev_pki(tls_dir: Path, *, client_names: Sequence[str] = ("billing",)) -> DevPki:
    """Create whatever part of the development PKI in ``tls_dir`` is missing or unusable.

    Idempotent: a second call with the same arguments touches no file. The CA is (re)created
    when its certificate or key is missing, they do not match, or it expires within 30 days.
    The server certificate and each named client certificate are (re)issued when missing, not
    signed by the current CA, not matching their key, expiring within 30 days, or (server) with
    other subject alternative names. Client certificates not named in ``client_names`` are
    left alone. Raises :class:`ValueError` for a client name that is not 1-64 letters, digits,
    ``_``, ``.`` or ``-`` starting with a letter or digit.
    """
    for name in client_names:
        _check_client_name(name)
    tls_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_cert_path, ca_key_path = tls_dir / "ca.pem", tls_dir / "ca-key.pem"
    ca = _load_valid(ca_cert_path, ca_key_path, issuer=None)
    if ca is None:
        ca = _create_ca(ca_cert_path, ca_key_path)

    server_cert_path, server_key_path = tls_dir / "server.pem", tls_dir / "server-key.pem"
    server = _load_valid(server_cert_path, server_key_path, issuer=ca[0])
    if server is None or not _has_server_names(server[0]):
        _issue(ca, server_cert_path, server_key_path, *_server_profile())

    clients: dict[str, tuple[Path, Path]] = {}
    for name in client_names:
        cert_path, key_path = _client_paths(tls_dir, name)
        client = _load_valid(cert_path, key_path, issuer=ca[0])
        if client is None or client[0].subject != _client_subject(name):
            _issue(ca, cert_path, key_path, *_client_profile(name))
        clients[name] = (cert_path, key_path)

    return DevPki(tls_dir, ca_cert_path, ca_key_path, server_cert_path, server_key_path, clients)


def issue_client_certificate(tls_dir: Path, name: str, out: Path | None = None) -> tuple[Path, Path]:
    """Issue (or re-issue) the client certificate ``CN=<name>,O=keymanager`` from the CA in
    ``tls_dir``; return the paths of ``client-<name>.pem`` and ``client-<name>-key.pem`` (in ``out``,
    made when missing, else in ``tls_dir``).

    Raises :class:`ValueError` for a bad name (see :func:`ensure_dev_pki`) and
    :class:`FileNotFoundError` when the CA has not been created.
    """
    _check_client_name(name)
    ca = _load_pair(tls_dir / "ca.pem", tls_dir / "ca-key.pem")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = _client_paths(out or tls_dir, name)
    _issue(ca, cert_path, key_path, *_client_profile(name))
    return cert_path, key_path


def certificate_subject(der_or_pem: bytes) -> str:
    """The RFC 4514 subject of a certificate given as DER or PEM, e.g. ``CN=billing,O=keymanager``.

    This is how a TLS client certificate is bound to a principal. Raises :class:`ValueError`
    if the bytes are not a certificate.
    """
    if der_or_pem.lstrip().startswith(b"-----BEGIN"):
        cert = x509.load_pem_x509_certificate(der_or_pem)
    else:
        cert = x509.load_der_x509_certificate(der_or_pem)
    return cert.subject.rfc4514_string()


_Pair = tuple[x509.Certificate, _PrivateKey]
_Profile = tuple[x509.Name, list[x509.ExtensionType]]


def _check_client_name(name: str) -> None:
    if not _CLIENT_NAME.fullmatch(name):
        raise ValueError("a client name is 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit")


def _client_paths(tls_dir: Path, name: str) -> tuple[Path, Path]:
    return tls_dir / f"client-{name}.pem", tls_dir / f"client-{name}-key.pem"


def _client_subject(name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )


def _server_profile() -> _Profile:
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_DNS_NAMES]
    names += [x509.IPAddress(ip) for ip in SERVER_IP_ADDRESSES]
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
        ]
    )
    extensions: list[x509.ExtensionType] = [
        x509.SubjectAlternativeName(names),
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
    ]
    return subject, extensions


def _client_profile(name: str) -> _Profile:
    extensions: list[x509.ExtensionType] = [
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
    ]
    return _client_subject(name), extensions


def _has_server_names(cert: x509.Certificate) -> bool:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(san.get_values_for_type(x509.DNSName)) == set(SERVER_DNS_NAMES) and set(
        san.get_values_for_type(x509.IPAddress)
    ) == set(SERVER_IP_ADDRESSES)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _load_pair(cert_path: Path, key_path: Path) -> _Pair:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{key_path} is not an EC private key")
    return cert, key


def _load_valid(cert_path: Path, key_path: Path, issuer: x509.Certificate | None) -> _Pair | None:
    """The pair at these paths if both exist, parse, match, are not near expiry and (when
    ``issuer`` is given) the certificate is signed by ``issuer``; otherwise None."""
    if not (cert_path.is_file() and key_path.is_file()):
        return None
    try:
        cert, key = _load_pair(cert_path, key_path)
        if issuer is not None:
            cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return None
    if cert.public_key() != key.public_key():
        return None
    now = _now()
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc - _RENEW_BEFORE:
        return None
    return cert, key


def _create_ca(cert_path: Path, key_path: Path) -> _Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME)])
    now = _now()
    usage = x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_pair(cert, key, cert_path, key_path)
    return cert, key


def _issue(
    ca: _Pair,
    cert_path: Path,
    key_path: Path,
    subject: x509.Name,
    extensions: list[x509.ExtensionType],
) -> None:
    """Issue a leaf certificate for a new EC P-256 key, with ``extensions`` (non-critical)
    besides the common ones, and write both files."""
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(min(now + _LEAF_LIFETIME, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    _write_pair(builder.sign(ca_key, hashes.SHA256()), key, cert_path, key_path)


def _write_pair(cert: x509.Certificate, key: _PrivateKey, cert_path: Path, key_path: Path) -> None:
    """Key first: a crash between the two writes leaves a mismatched pair, which is re-issued."""
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write_file(key_path, key_pem, 0o600)
    _write_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def _write_file(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` atomically by a new file created with ``mode`` (never wider, not even
    for a moment: the mode is given to ``open``, not applied afterwards)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
