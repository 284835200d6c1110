"""The KMIP listener: TTLV over TLS 1.2+ with mandatory client certificates, in every worker.

Each worker process listens on ``KM_HOST:KM_KMIP_PORT`` itself (``SO_REUSEPORT``: the kernel
spreads connections over the workers, as the HTTPS workers share theirs), beside HTTPS, on the
same services (:class:`~keymanager.api.kmip.KmipDoor`). :class:`WithKmip` starts it once the
worker's app has started (its lifespan) and stops it before the app stops.

Per connection:

1. the TLS handshake, within ``KM_TLS_HANDSHAKE_TIMEOUT_SECONDS``: a client without a certificate,
   or with one the client CA (``KM_TLS_CLIENT_CA``, else the development CA) did not issue, is
   refused there; the verified certificate's subject (RFC 4514) names the caller;
2. per request: up to ``KM_KMIP_IDLE_TIMEOUT_SECONDS`` for its first byte, then
   ``KM_HEADER_TIMEOUT_SECONDS`` for the whole message. Its 8-byte TTLV header is read first and
   its length checked against ``KM_KMIP_MAX_MESSAGE_BYTES`` (``services/kmip/ttlv.py``) before
   anything of that size is read; a header that is not a request message's, a length over the
   limit, a message that ends early or arrives too slowly closes the connection (counted in
   ``serving/refusals.py``);
3. the door's answer is written (within the same deadline for a reader that stops reading); the
   connection stays open for the next request unless the door closes it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509

from keymanager.api.kmip import Answer
from keymanager.config import Settings
from keymanager.serving.refusals import connection_refusals

log = logging.getLogger(__name__)

HEADER_BYTES = 8
STOP_SECONDS = 5.0
"""How long a stopping worker waits for requests in flight before it drops their connections."""

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Door(Protocol):
    """What the listener hands each message to (``api/kmip.py`` ``KmipDoor``)."""

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

    def __init__(self, door: Door, options: KmipOptions) -> None:
        self._door = door
        self._options = options
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen; OSError when the port cannot be bound."""
        options = self._options
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol,
            options.host,
            options.port,
            ssl=tls_context(options),
            ssl_handshake_timeout=options.handshake_timeout,
            reuse_port=True,
        )

    def _protocol(self) -> _Connection:
        """A connection's protocol: asyncio's streams, told the client's address by the front
        (``serving/front.py``: a trusted balancer's PROXY header) when there is one."""
        reader = asyncio.StreamReader()
        connection = _Connection(reader)
        connection.on_connected = lambda r, w: self._connected(r, w, connection.announced_client)
        return connection

    async def stop(self) -> None:
        """Stop listening; requests in flight get :data:`STOP_SECONDS`, then their connections drop."""
        if self._server is not None:
            self._server.close()
        if self._connections:
            await asyncio.wait(self._connections, timeout=STOP_SECONDS)
        for task in self._connections:
            task.cancel()

    async def _connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, announced: tuple[str, int] | None
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = announced or writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) else ""
        try:
            await self._serve(reader, writer, _subject(writer), client)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except TimeoutError:
            connection_refusals().refused(client, "kmip_timeout")
        except Exception as exc:  # a fault of ours: the connection closes, the class name to the log
            log.error("KMIP connection ended by %s", type(exc).__name__)
        finally:
            self._connections.discard(task)
            writer.transport.abort()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, subject: str | None, client: str
    ) -> None:
        options = self._options
        loop = asyncio.get_running_loop()
        while True:
            started = False
            try:
                async with asyncio.timeout(options.idle_timeout) as deadline:  # (no task per read, as wait_for makes)
                    first = await reader.readexactly(1)
                    started = True
                    deadline.reschedule(loop.time() + options.header_timeout)
                    message = await self._message(reader, first, client)
            except asyncio.IncompleteReadError:
                return  # the client closed (or stopped mid-message, then closed)
            except TimeoutError:
                if not started:
                    return  # idle: nothing to count
                raise
            if message is None:
                return
            answer = await self._door.exchange(message, subject, client)
            async with asyncio.timeout(options.header_timeout):
                writer.write(answer.response)
                await writer.drain()
            if answer.close:
                return

    async def _message(self, reader: asyncio.StreamReader, first: bytes, client: str) -> bytes | None:
        """The rest of a request message after its ``first`` byte; None (counted) when its header
        is not a request message's or its length is over the limit."""
        header = first + await reader.readexactly(HEADER_BYTES - 1)
        length = self._door.message_length(header)
        if length is None:
            connection_refusals().refused(client, "kmip_header")
            return None
        return header + await reader.readexactly(length)


class _Connection(asyncio.StreamReaderProtocol):
    """asyncio's stream protocol with the address the connection's front announces."""

    announced_client: tuple[str, int] | None = None

    def __init__(self, reader: asyncio.StreamReader) -> None:
        super().__init__(reader, self._started)
        self.on_connected: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]] | None = None

    def _started(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Awaitable[None] | None:
        return None if self.on_connected is None else self.on_connected(reader, writer)


def _subject(writer: asyncio.StreamWriter) -> str | None:
    """The RFC 4514 subject of the client's verified certificate."""
    ssl_object = writer.get_extra_info("ssl_object")
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
