"""The connection side of serving: uvicorn's HTTP protocol and event loop, with client
certificates and bounds on what a connection may cost before it has sent a whole request head.

uvicorn does not put the peer certificate in the ASGI scope, so :class:`ClientCertProtocol`
reads the verified certificate's subject once per connection and adds it to every
request's scope as ``scope["extensions"]["tls"]["client_subject"]`` (RFC 4514).

uvicorn bounds neither the time nor the size of a request head: a client that sends half a
head kept its connection open for minutes, and a 200 KB head was served. The protocol gives
each head ``KM_HEADER_TIMEOUT_SECONDS`` from its first byte (or from the connection's start)
and ``KM_MAX_HEADER_BYTES``: past the time it answers 408 and closes, past the size 431.
The TLS handshake gets ``KM_TLS_HANDSHAKE_TIMEOUT_SECONDS`` through the event loop's server
(:func:`new_event_loop`), whose connections pass ``serving/front.py`` first (the PROXY header of a
trusted balancer, then TLS); idle keep-alive connections close after ``KM_KEEPALIVE_TIMEOUT_SECONDS``.

Each request is known by its client's address (``scope["client"]``): the one the front was told
(``announced_client``), or the one a trusted balancer's ``Forwarded`` / ``X-Forwarded-For`` names
(``serving/client_address.py``). Refusals (400, 408, 431) are counted and logged in bounded volume
(``serving/refusals.py``), never a line each.

Vault's clients list with the method ``LIST``, which httptools (llhttp) cannot parse: a request that
begins a read with ``LIST <target>`` is read as ``GET <target>?list=true``, the form Vault takes too
and the Go client sends (the Transit door reads it as a list, ``doors/transit/door.py``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl
from dataclasses import dataclass
from typing import Any, cast

import uvloop
from cryptography import x509
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from keymanager.api.request_context import next_request_id
from keymanager.config import Settings
from keymanager.serving.client_address import proxy_trust
from keymanager.serving.front import ConnectionFront
from keymanager.serving.refusals import connection_refusals

CLOSE_GRACE_SECONDS = 1.0
"""After a refusal, how long a TLS close may wait for the client's close_notify before the socket is dropped."""

_REFUSALS = {400: "bad_request", 408: "head_timeout", 431: "head_too_large"}
_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class _CountedElsewhere(logging.Filter):
    """Drops uvicorn's line for each malformed request: :class:`ClientCertProtocol` counts those
    (``serving/refusals.py``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Invalid HTTP request received."


_HTTP_LOG = logging.getLogger("keymanager.serving.http")
"""uvicorn's per-connection messages, less the ones :class:`_CountedElsewhere` drops."""
_HTTP_LOG.addFilter(_CountedElsewhere())


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


def _as_get_list(data: bytes) -> bytes:
    """``LIST <target> …`` as ``GET <target>?list=true …`` (``&list=true`` after a query)."""
    target, space, rest = data[len(b"LIST ") :].partition(b" ")
    if not space:
        return data  # no whole request line: httptools refuses it as before
    return b"GET " + target + (b"&" if b"?" in target else b"?") + b"list=true " + rest


class ClientCertProtocol(HttpToolsProtocol):
    """httptools protocol that exposes the TLS client certificate's subject to the app."""

    client_subject: str | None = None
    announced_client: tuple[str, int] | None = None
    """The client's address as the connection's front learnt it (``serving/front.py``)."""
    _head_bytes = 0
    _head_timer: asyncio.TimerHandle | None = None
    _refused = False
    _between_requests = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = _HTTP_LOG

    def connection_made(self, transport: Any) -> None:
        # Duck-typed: what it does not define itself is the wrapped transport's.
        super().connection_made(cast(asyncio.Transport, OneWritePerTurn(transport, self.loop)))
        if self.announced_client is not None:
            self.client = self.announced_client
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
        self._between_requests = False
        super().on_message_begin()
        if self._head_timer is None:  # the next request on a kept-alive connection
            self._start_head()
        if self.client_subject is not None:
            self.scope["extensions"] = {"tls": {"client_subject": self.client_subject}}

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._between_requests and data.startswith(b"LIST "):
            data = _as_get_list(data)
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
        if self.client is not None:
            client = proxy_trust().forwarded_client(self.client[0], self.headers)
            if client != self.client[0]:
                self.scope["client"] = (client, 0)
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request that is not valid HTTP: ours, counted (no line of its own)."""
        self._refuse(400, "the request is not valid HTTP")

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._between_requests = True
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
        connection_refusals().refused(self.client[0] if self.client else "", _REFUSALS[status])
        body = json.dumps(
            {"error": {"code": "invalid_request", "message": message}, "request_id": next_request_id()}
        ).encode()
        reason = _REASONS[status]
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.transport.close()
        self.loop.call_later(CLOSE_GRACE_SECONDS, self.transport.abort)


HELD_AT_MOST = 16 * 1024
"""Bytes :class:`OneWritePerTurn` holds back at most (one TLS record's worth)."""


class OneWritePerTurn:
    """A transport that sends the small writes of one turn of the event loop in one write.

    uvicorn writes an answer's head and its body separately: over TLS, two records and two
    ``send`` calls for one small answer. Held until the loop's next turn, they leave as one. What
    is held is sent at once when it reaches :data:`HELD_AT_MOST` bytes (a stream's chunks pass
    straight through, so the transport's flow control sees them as it always did); closing sends
    what is held first; everything else is the wrapped transport's.
    """

    __slots__ = ("_held", "_held_bytes", "_loop", "_transport")

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None
        self._held_bytes = 0

    def write(self, data: bytes) -> None:
        if self._held is None:
            self._held, self._held_bytes = [data], len(data)
            self._loop.call_soon(self._send)
        else:
            self._held.append(data)
            self._held_bytes += len(data)
        if self._held_bytes >= HELD_AT_MOST:
            self._send()

    def close(self) -> None:
        self._send()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def _send(self) -> None:
        held, self._held = self._held, None
        if held:
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _FrontedLoop(uvloop.Loop):
    """uvloop whose servers accept connections through a :class:`~keymanager.serving.front.ConnectionFront`
    (the PROXY header, then TLS with a handshake deadline of our own: 60 s otherwise)."""

    async def create_server(self, protocol_factory: Any, *args: Any, **kwargs: Any) -> Any:
        tls: ssl.SSLContext | None = kwargs.pop("ssl", None)
        trust = proxy_trust()
        if tls is None and not trust.networks:
            return await super().create_server(protocol_factory, *args, **kwargs)
        kwargs.pop("ssl_handshake_timeout", None)  # the front's: KM_TLS_HANDSHAKE_TIMEOUT_SECONDS
        limits = connection_limits()

        def front() -> ConnectionFront:
            return ConnectionFront(
                protocol_factory,
                tls=tls,
                trust=trust,
                header_timeout=limits.header_timeout,
                handshake_timeout=limits.handshake_timeout,
                loop=self,
            )

        return await super().create_server(front, *args, **kwargs)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's ``loop`` hook (a custom loop factory): a :class:`_FrontedLoop`."""
    return _FrontedLoop()
