"""What a connection passes before the HTTP protocol sees it: the PROXY header, then TLS.

A balancer that passes TLS through (HAProxy ``send-proxy-v2``) sends the PROXY header in clear in
front of the client's TLS handshake, so it must be read before TLS starts. The event loop's server
(``serving/protocol.py`` :func:`~keymanager.serving.protocol.new_event_loop`) therefore accepts
connections with a :class:`ConnectionFront` and no TLS of its own; per connection the front:

1. from a peer that must send a PROXY header (``serving/client_address.py``), reads it — the
   client's address — within ``KM_HEADER_TIMEOUT_SECONDS`` and ``proxy_header.MAX_HEADER_BYTES``;
   a missing, malformed, oversized or slow one closes the connection;
2. from any other peer, closes a connection that begins with a PROXY header, and otherwise reads
   nothing ahead: the first bytes go on as they came;
3. hands the connection, with the bytes read past the header, to uvloop's TLS protocol (the one
   ``create_server(ssl=…)`` uses, with the handshake deadline ``KM_TLS_HANDSHAKE_TIMEOUT_SECONDS``)
   in front of the HTTP protocol, or straight to the HTTP protocol without TLS; the HTTP protocol
   learns the client's address as ``announced_client``.

Every refusal, failed TLS handshakes included, is counted (``serving/refusals.py``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any, Protocol

from uvloop.loop import SSLProtocol  # type: ignore[attr-defined]  # (uvloop's stubs omit it)

from keymanager.serving import proxy_header
from keymanager.serving.client_address import ProxyTrust
from keymanager.serving.refusals import connection_refusals


class AnnouncedClient(Protocol):
    """The HTTP protocol behind the front: told the client's address before its connection is made."""

    announced_client: tuple[str, int] | None

    def connection_made(self, transport: Any) -> None: ...
    def data_received(self, data: bytes) -> None: ...


class ConnectionFront(asyncio.Protocol):
    """One connection until its PROXY header (if any) is read; see the module docstring."""

    def __init__(
        self,
        http: Callable[[], AnnouncedClient],
        *,
        tls: ssl.SSLContext | None,
        trust: ProxyTrust,
        header_timeout: float,
        handshake_timeout: float,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._http = http
        self._tls = tls
        self._trust = trust
        self._header_timeout = header_timeout
        self._handshake_timeout = handshake_timeout
        self._loop = loop
        self._transport: Any = None
        self._peer: tuple[str, int] = ("", 0)
        self._expects_header = False
        self._buffer = b""
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)
        self._expects_header = self._trust.expects_header(self._peer[0])
        waits = self._handshake_timeout if self._tls is not None and not self._expects_header else self._header_timeout
        self._timer = self._loop.call_later(waits, self._timed_out)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._expects_header:
            try:
                header = proxy_header.parse(self._buffer)
            except proxy_header.MalformedProxyHeader:
                self._refuse("proxy_header")
                return
            if header is not None:
                self._hand_over(header.source or self._peer, self._buffer[header.length :])
            return
        begins = proxy_header.may_begin_header(self._buffer)
        if begins:
            self._refuse("untrusted_proxy_header")
        elif begins is False:
            self._hand_over(self._peer, self._buffer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()

    def _timed_out(self) -> None:
        self._timer = None
        if self._expects_header:
            self._refuse("proxy_header")
        else:
            self._refuse("head_timeout" if self._tls is None else "tls")

    def _refuse(self, reason: str) -> None:
        self._cancel_timer()
        connection_refusals().refused(self._peer[0], reason)
        self._transport.abort()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _hand_over(self, client: tuple[str, int], rest: bytes) -> None:
        """The connection to TLS (or straight to HTTP), with ``rest``: the bytes read past the header."""
        self._cancel_timer()
        http = self._http()
        http.announced_client = client
        if self._tls is None:
            self._transport.set_protocol(http)
            http.connection_made(self._transport)
            if rest:
                http.data_received(rest)
            return
        handshake = self._loop.create_future()
        handshake.add_done_callback(lambda done: self._handshake_done(done, client[0]))
        tls = SSLProtocol(self._loop, http, self._tls, handshake, True, None, True, self._handshake_timeout, None)
        self._transport.set_protocol(tls)
        tls.connection_made(self._transport)
        while rest:
            buffer = tls.get_buffer(len(rest))
            taken = min(len(buffer), len(rest))
            buffer[:taken] = rest[:taken]
            tls.buffer_updated(taken)
            rest = rest[taken:]

    @staticmethod
    def _handshake_done(handshake: asyncio.Future[None], client: str) -> None:
        if handshake.cancelled() or handshake.exception() is not None:
            connection_refusals().refused(client, "tls")
