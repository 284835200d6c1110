"""The names the service answers to: the ``Host`` values a SigV4-signed request may be signed for.

A request signed for another endpoint that holds the same key pair (AWS itself, another
installation, a test rig) must not replay here, so ``domain/sigv4.py`` refuses a signed ``Host``
that is not one of these. ``KM_PUBLIC_HOSTS``, when set, is the whole list (a balancer's name goes
there, with its port unless it is 443). Otherwise: every DNS and IP name of the TLS certificate
with the listen port (and bare, when the port is 443), and the listen address with its port.
A wildcard name of the certificate matches nothing: name such hosts in ``KM_PUBLIC_HOSTS``.
"""

from __future__ import annotations

import ipaddress
import logging

from cryptography import x509

from keymanager.config import Settings
from keymanager.domain.sigv4 import normal_host

log = logging.getLogger(__name__)


def public_hosts(settings: Settings) -> frozenset[str]:
    """The :func:`~keymanager.domain.sigv4.normal_host` forms of the service's own names (module docstring)."""
    if settings.public_hosts:
        return frozenset(normal_host(name) for name in settings.public_hosts)
    names = [*_certificate_names(settings), settings.host]
    return frozenset(normal_host(_with_port(name, settings.port)) for name in names)  # port 443: bare


def _with_port(name: str, port: int) -> str:
    """``name:port``, an IPv6 address in brackets."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return f"{name}:{port}"
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def _certificate_names(settings: Settings) -> list[str]:
    """The DNS and IP names of the TLS certificate; none when there is no readable certificate."""
    path = settings.resolved_tls_cert()
    try:
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except FileNotFoundError:
        return []
    except (OSError, ValueError, x509.ExtensionNotFound):
        log.warning("the TLS certificate %s names no host: signed requests must name the listen address", path)
        return []
    return [*names.get_values_for_type(x509.DNSName), *(str(ip) for ip in names.get_values_for_type(x509.IPAddress))]
