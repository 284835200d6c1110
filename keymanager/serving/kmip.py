"""The KMIP listener: TTLV over TLS 1.2+ with mandatory client certificates, in every worker.

Each worker process accepts on ``KM_HOST:KM_KMIP_PORT`` beside HTTPS, on the same services
(:class:`~keymanager.doors.kmip.door.KmipDoor`), on the one socket ``keymanager serve`` bound before the
workers started (``serving/listeners.py``: never ``SO_REUSEPORT``, so no other installation on
the host can share the port), as the HTTPS workers share theirs. :class:`WithKmip` starts it once
the worker's app has started (its lifespan) and stops it before the app stops.

Per connection:

1. the TLS handshake, within ``KM_TLS_HANDSHAKE_TIMEOUT_SECONDS``: a client without a certificate,
   or with one the client CA (``KM_TLS_CLIENT_CA``, else the development CA) did not issue, is
   refused there; the verified certificate's subject (RFC 4514) names the caller;
2. per request: up to ``KM_KMIP_IDLE_TIMEOUT_SECONDS`` for its first byte, then
   ``KM_HEADER_TIMEOUT_SECONDS`` for the whole message. Its 8-byte TTLV header is read first and
   its length checked against ``KM_KMIP_MAX_MESSAGE_BYTES`` (``doors/kmip/ttlv.py``) before
   anything of that size is read; a header that is not a request message's, a length over the
   limit, a message that ends early or arrives too slowly closes the connection (counted in
   ``serving/refusals.py``);
3. the door's answer is written (within the same deadline for a reader that stops reading); the
   connection stays open for the next request unless the door closes it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from cryptography import x509

from keymanager.config import Settings
from keymanager.doors.kmip.door import Answer
from keymanager.serving.refusals import connection_refusals

log = logging.getLogger(__name__)

HEADER_BYTES = 8
READ_AHEAD_BYTES = 128 * 1024
"""Bytes a connection holds, read ahead while its message is answered, before reading pauses (as asyncio's streams)."""
STOP_SECONDS = 5.0
"""How long a stopping worker waits for requests in flight before it drops their connections."""

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Door(Protocol):
    """What the listener hands each message to (``doors/kmip/door.py`` ``KmipDoor``)."""

    def message_length(self, header: bytes) -> int | None:
        """The length a request message's 8-byte ``header`` announces, if within the bounds (else None)."""

    async def exchange(self, message: bytes, subject: str | None, client: str) -> Answer: ...


@dataclass(frozen=True)
class KmipOptions:
    """Where and how the listener serves."""

    host: str
    port: int
    cert: Path
    key: Path
    client_ca: Path
    header_timeout: float
    idle_timeout: float
    handshake_timeout: float

    @classmethod
    def of(cls, settings: Settings) -> KmipOptions | None:
        """The options ``settings`` give; None when KMIP is off (port 0) or there is no certificate."""
        cert, key = settings.resolved_tls_cert(), settings.resolved_tls_key()
        if settings.kmip_port == 0 or not cert.exists() or not key.exists():
            return None
        return cls(
            host=settings.host,
            port=settings.kmip_port,
            cert=cert,
            key=key,
            client_ca=settings.tls_client_ca or settings.tls_dir / "ca.pem",
            header_timeout=settings.header_timeout_seconds,
            idle_timeout=settings.kmip_idle_timeout_seconds,
            handshake_timeout=settings.tls_handshake_timeout_seconds,
        )


def tls_context(options: KmipOptions) -> ssl.SSLContext:
    """TLS 1.2 or later, the service's certificate, client certificates required and verified."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(options.cert, options.key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=str(options.client_ca))
    return context


class KmipListener:
    """One worker's KMIP server (see the module docstring)."""

    def __init__(self, door: Door, options: KmipOptions, sock: socket.socket | None = None) -> None:
        """``sock``: the listening socket to accept on (the serving process's); without one, the
        listener binds ``options.host:options.port`` itself (alone: without ``SO_REUSEPORT``)."""
        self._door = door
        self._options = options
        self._sock = sock
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen; OSError when the port cannot be bound."""
        options = self._options
        loop = asyncio.get_running_loop()
        where: dict[str, Any] = (
            {"sock": self._sock}
            if self._sock is not None
            else {
                "host": options.host,
                "port": options.port,
            }
        )
        self._server = await loop.create_server(
            lambda: _Connection(self._door.message_length, options, self._open, loop),
            ssl=tls_context(options),
            ssl_handshake_timeout=options.handshake_timeout,
            **where,
        )

    async def stop(self) -> None:
        """Stop listening; requests in flight get :data:`STOP_SECONDS`, then their connections drop."""
        if self._server is not None:
            self._server.close()
        if self._connections:
            await asyncio.wait(self._connections, timeout=STOP_SECONDS)
        for task in self._connections:
            task.cancel()

    def _open(self, connection: _Connection) -> None:
        """Serve ``connection`` (its TLS handshake done) in a task of its own until it closes."""
        task = asyncio.get_running_loop().create_task(self._connected(connection))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _connected(self, connection: _Connection) -> None:
        client = connection.client
        try:
            while (message := await connection.message()) is not None:
                answer = await self._door.exchange(message, connection.subject, client)
                await connection.answer(answer.response)
                if answer.close:
                    return
        except (ConnectionError, ssl.SSLError):
            pass
        except TimeoutError:
            connection_refusals().refused(client, "kmip_timeout")
        except Exception as exc:  # a fault of ours: the connection closes, the class name to the log
            log.error("KMIP connection ended by %s", type(exc).__name__)
        finally:
            connection.abort()


class _Connection(asyncio.Protocol):
    """One connection's bytes framed into request messages, within its deadlines (module docstring, 2
    and 3), for the listener's task of that connection: :meth:`message`, then :meth:`answer`, in turn.

    Told the client's address by the front (``serving/front.py``: a trusted balancer's PROXY header)
    when there is one. What arrives while a message is being answered waits in the buffer; past
    :data:`READ_AHEAD_BYTES`, reading pauses until the next message is asked for.
    """

    announced_client: tuple[str, int] | None = None

    def __init__(
        self,
        message_length: Callable[[bytes], int | None],
        options: KmipOptions,
        opened: Callable[[_Connection], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._message_length = message_length
        self._options = options
        self._opened = opened
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[bytes | None] | None = None
        """The listener's wait for the next message (None: it is answering one)."""
        self._started = False
        """Whether the first byte of the message being read has arrived (its deadline runs)."""
        self._length: int | None = None
        """The length the header of the message being read announces."""
        self._timer: asyncio.TimerHandle | None = None
        self._lost = False
        self._reading_paused = False
        self._writable: asyncio.Future[None] | None = None
        self.client = ""
        self.subject: str | None = None

    # -- the listener's side -------------------------------------------------------------
    def message(self) -> asyncio.Future[bytes | None]:
        """The next request message; None (refusals counted) when the connection is to close: the
        client closed it or was idle, or the message's header is not a request message's or its
        length over the limit. TimeoutError when the message did not arrive within its deadline."""
        waiter = self._waiter = self._loop.create_future()
        if self._lost:
            waiter.set_result(None)
            return waiter
        if self._reading_paused:
            self._reading_paused = False
            assert self._transport is not None
            self._transport.resume_reading()
        if self._buffer:
            self._frame()
        else:
            self._timer = self._loop.call_later(self._options.idle_timeout, self._settle, None)
        return waiter

    async def answer(self, response: bytes) -> None:
        """Send ``response``; TimeoutError when a client that stopped reading does not take it within
        the header deadline, ConnectionResetError when the connection was lost."""
        if self._lost or self._transport is None:
            raise ConnectionResetError("the KMIP connection was lost")
        self._transport.write(response)
        if self._writable is not None:  # the transport holds too much: wait until the client reads
            async with asyncio.timeout(self._options.header_timeout):
                await self._writable

    def abort(self) -> None:
        self._cancel_timer()
        if self._transport is not None:
            self._transport.abort()

    # -- the transport's side ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        peer = self.announced_client or transport.get_extra_info("peername")
        self.client = str(peer[0]) if isinstance(peer, tuple) else ""
        self.subject = _subject(transport.get_extra_info("ssl_object"))
        self._opened(self)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._waiter is not None:
            self._frame()
        elif len(self._buffer) > READ_AHEAD_BYTES and not self._reading_paused:
            self._reading_paused = True
            assert self._transport is not None
            self._transport.pause_reading()

    def eof_received(self) -> bool:
        self._closed()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed()
        if self._writable is not None and not self._writable.done():
            self._writable.set_exception(ConnectionResetError("the KMIP connection was lost"))

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    # -- framing ---------------------------------------------------------------------------
    def _frame(self) -> None:
        """Hand the waiting listener the message in the buffer once it is whole (its deadline runs
        from its first byte); refuse its header as soon as it has one."""
        buffer = self._buffer
        if self._length is None:
            if not self._started:  # its first byte: the message's deadline starts
                self._started = True
                self._cancel_timer()
                self._timer = self._loop.call_later(self._options.header_timeout, self._timed_out)
            if len(buffer) < HEADER_BYTES:
                return
            self._length = self._message_length(bytes(buffer[:HEADER_BYTES]))
            if self._length is None:
                connection_refusals().refused(self.client, "kmip_header")
                self._settle(None)
                return
        end = HEADER_BYTES + self._length
        if len(buffer) >= end:
            message = bytes(buffer[:end])
            del buffer[:end]
            self._length = None
            self._settle(message)

    def _settle(self, message: bytes | None) -> None:
        self._cancel_timer()
        self._started = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(message)

    def _timed_out(self) -> None:
        self._timer = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError())

    def _closed(self) -> None:
        self._lost = True
        self._settle(None)  # the client closed (or stopped mid-message, then closed)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _subject(ssl_object: ssl.SSLObject | None) -> str | None:
    """The RFC 4514 subject of the client's verified certificate."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return x509.load_der_x509_certificate(der).subject.rfc4514_string() if der else None


class WithKmip:
    """A worker's app, with its KMIP listener started once the app has started and stopped before
    it stops (the ASGI lifespan); every other attribute is the app's."""

    def __init__(self, app: Any, listener: KmipListener) -> None:
        self.app = app
        self.listener = listener

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def received() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                await self.listener.stop()
            return message

        async def sent(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                try:
                    await self.listener.start()
                except OSError as exc:
                    log.error("the KMIP listener cannot start: %s", exc)
                    message = {"type": "lifespan.startup.failed", "message": f"KMIP listener: {exc}"}
            await send(message)

        await self.app(scope, received, sent)
