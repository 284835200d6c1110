"""Serving the API with uvicorn: HTTPS (TLS 1.2 minimum), optional client certificates, and
bounds on what a connection may cost before it has sent a whole request head.

uvicorn does not put the peer certificate in the ASGI scope, so :class:`ClientCertProtocol`
reads the verified certificate's subject once per connection and adds it to every
request's scope as ``scope["extensions"]["tls"]["client_subject"]`` (RFC 4514).

uvicorn bounds neither the time nor the size of a request head: a client that sends half a
head kept its connection open for minutes, and a 200 KB head was served. The protocol gives
each head ``KM_HEADER_TIMEOUT_SECONDS`` from its first byte (or from the connection's start)
and ``KM_MAX_HEADER_BYTES``: past the time it answers 408 and closes, past the size 431.
The TLS handshake gets ``KM_TLS_HANDSHAKE_TIMEOUT_SECONDS`` through the event loop's server
(:func:`new_event_loop`); idle keep-alive connections close after ``KM_KEEPALIVE_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
import uvloop
from cryptography import x509
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from keymanager.api.middleware import next_request_id
from keymanager.config import Settings

APP_FACTORY = "keymanager.api.app:app_from_env"
GRACEFUL_SHUTDOWN_SECONDS = 10
"""On SIGTERM, requests in flight get this long; idle keep-alive connections do not hold the exit."""
CLOSE_GRACE_SECONDS = 1.0
"""After a refusal, how long a TLS close may wait for the client's close_notify before the socket is dropped."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may cost before its request head is complete."""

    header_timeout: float
    max_header_bytes: int
    handshake_timeout: float


@functools.cache
def connection_limits() -> ConnectionLimits:
    """The limits of this process, from its settings (read once: every worker reads its own)."""
    settings = Settings()
    return ConnectionLimits(
        header_timeout=settings.header_timeout_seconds,
        max_header_bytes=settings.max_header_bytes,
        handshake_timeout=settings.tls_handshake_timeout_seconds,
    )


class ClientCertProtocol(HttpToolsProtocol):
    """httptools protocol that exposes the TLS client certificate's subject to the app."""

    client_subject: str | None = None
    _head_bytes = 0
    _head_timer: asyncio.TimerHandle | None = None
    _refused = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.client_subject = None
        self._start_head()
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
        if self._head_timer is None:  # the next request on a kept-alive connection
            self._start_head()
        if self.client_subject is not None:
            self.scope["extensions"] = {"tls": {"client_subject": self.client_subject}}

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self._head_timer is not None and self._head_bytes > connection_limits().max_header_bytes:
            self._refuse(431, "the request head is larger than the limit")

    def on_url(self, url: bytes) -> None:
        self._head_bytes += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._end_head()
        if self._head_bytes > connection_limits().max_header_bytes:
            self._refuse(431, "the request head is larger than the limit")
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_head()
        super().connection_lost(exc)

    def _start_head(self) -> None:
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(connection_limits().header_timeout, self._head_timed_out)

    def _end_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.cycle is None or self.cycle.response_complete:
            self._refuse(408, "the request head did not arrive in time")

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` in the API's error shape, close, and drop the socket if the client stalls."""
        self._end_head()
        self._refused = True
        if self.transport.is_closing():
            return
        log.warning("connection refused with %s: %s", status, message)
        body = json.dumps(
            {"error": {"code": "invalid_request", "message": message}, "request_id": next_request_id()}
        ).encode()
        reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.transport.close()
        self.loop.call_later(CLOSE_GRACE_SECONDS, self.transport.abort)


class _BoundedHandshakeLoop(uvloop.Loop):
    """uvloop with a TLS handshake deadline of our own on every server it creates (60 s otherwise)."""

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_handshake_timeout", connection_limits().handshake_timeout)
        return await super().create_server(*args, **kwargs)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's ``loop`` hook (a custom loop factory): a :class:`_BoundedHandshakeLoop`."""
    return _BoundedHandshakeLoop()


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
    keepalive_timeout: int = 5


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
        loop="keymanager.api.server:new_event_loop",
        timeout_keep_alive=options.keepalive_timeout,
        log_level=options.log_level,
        log_config=None,  # the service's own format (api/logs.py), set up in each process
        access_log=False,  # the access log is the service's own (KM_ACCESS_LOG)
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        **tls,
    )


@contextlib.contextmanager
def replica_metrics_dir(root: Path) -> Iterator[Path]:
    """A Prometheus multiprocess directory of this replica's own, under ``root``, for as long as
    the block runs.

    Replicas sharing one ``KM_VAR_DIR`` each sum their own workers' samples: a replica starting
    removes only the directories whose replica is gone (its lock file no longer held), never a
    live one's. The lock is held by the ``keymanager serve`` process, which outlives its workers.
    """
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = f"{socket.gethostname()}-{os.getpid()}"
    lock = os.open(root / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _remove_stale_metrics(root, keep=name)
        mine = root / name
        shutil.rmtree(mine, ignore_errors=True)
        mine.mkdir(mode=0o700)
        yield mine
    finally:
        os.close(lock)
        shutil.rmtree(root / name, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (root / f"{name}.lock").unlink()


def _remove_stale_metrics(root: Path, keep: str) -> None:
    """Remove every replica directory under ``root`` whose lock nobody holds (its replica died).

    A replica creates and locks its lock file before its directory, so a directory without a
    lock file belongs to nobody.
    """
    for entry in sorted(root.iterdir()):
        replica = entry.name.removesuffix(".lock")
        if replica == keep:
            continue
        if entry.name.endswith(".lock"):
            try:
                fd = os.open(entry, os.O_RDWR)
            except FileNotFoundError:
                continue  # another replica removed it meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live replica
            finally:
                os.close(fd)
            shutil.rmtree(root / replica, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        elif not (root / f"{replica}.lock").exists():
            shutil.rmtree(entry, ignore_errors=True)
