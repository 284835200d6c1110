"""Serving the API with uvicorn: HTTPS (TLS 1.2 minimum), optional client certificates.

uvicorn does not put the peer certificate in the ASGI scope, so :class:`ClientCertProtocol`
reads the verified certificate's subject once per connection and adds it to every
request's scope as ``scope["extensions"]["tls"]["client_subject"]`` (RFC 4514).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

APP_FACTORY = "keymanager.api.app:app_from_env"
GRACEFUL_SHUTDOWN_SECONDS = 10
"""On SIGTERM, requests in flight get this long; idle keep-alive connections do not hold the exit."""


class ClientCertProtocol(HttpToolsProtocol):
    """httptools protocol that exposes the TLS client certificate's subject to the app."""

    client_subject: str | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.client_subject = None
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None:
            return
        der = ssl_object.getpeercert(binary_form=True)
        if der:  # only present when the chain verified against KM_TLS_CLIENT_CA
            self.client_subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()

    def shutdown(self) -> None:
        """At server shutdown, drop idle keep-alive connections at once.

        A TLS close waits for the peer's close_notify (up to 30 s in asyncio and uvloop); an idle
        client does not send it, and would hold a stopping replica until its orchestrator kills it.
        """
        if self.cycle is None or self.cycle.response_complete:
            self.transport.abort()
        else:
            super().shutdown()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.client_subject is not None:
            self.scope["extensions"] = {"tls": {"client_subject": self.client_subject}}


def tls12_context(config: uvicorn.Config, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """uvicorn's context with TLS 1.2 as the minimum version."""
    context = default()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int
    workers: int
    tls_cert: Path | None
    tls_key: Path | None
    client_ca: Path | None
    log_level: str = "warning"


def serve(options: ServeOptions) -> None:
    """Run the service until interrupted; plain HTTP when no certificate is given."""
    tls: dict[str, Any] = {}
    if options.tls_cert is not None and options.tls_key is not None:
        tls = {
            "ssl_certfile": str(options.tls_cert),
            "ssl_keyfile": str(options.tls_key),
            "ssl_context_factory": tls12_context,
        }
        if options.client_ca is not None:
            tls["ssl_ca_certs"] = str(options.client_ca)
            tls["ssl_cert_reqs"] = ssl.CERT_OPTIONAL
    uvicorn.run(
        APP_FACTORY,
        factory=True,
        host=options.host,
        port=options.port,
        workers=options.workers,
        http="keymanager.api.server:ClientCertProtocol",
        log_level=options.log_level,
        access_log=False,
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        **tls,
    )
