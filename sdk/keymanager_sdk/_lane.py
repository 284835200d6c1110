"""The sync client's JSON calls over plain keep-alive HTTP/1.1 connections.

An encrypt or decrypt is one small JSON request and one small JSON answer, and httpx's general
machinery (URL and header models, cookie jar, h11's state machine) cost more client CPU than the
service spends on the request: on the 2-core development machine a 1 KB encrypt took 1.8 ms of
client CPU through ``httpx.Client`` and 0.8 ms here (``bench/README.md``). :class:`JsonLane`
sends such calls with the standard library's ``http.client`` on the same TLS context, and hands
back an ``httpx.Response``; failures are raised as the ``httpx.TransportError`` subclasses httpx
would raise, so retries and error mapping are unchanged. Streams, proxies and custom transports
stay with httpx.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import ssl
import threading
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

import httpx


class JsonLane:
    """A pool of keep-alive connections to one origin, for requests with a JSON (or no) body.

    Thread-safe: each request takes an idle connection (or opens one) and gives it back when the
    answer has been read whole. A connection the server has closed while idle is noticed before
    reuse (it is readable) and dropped; idle connections older than ``keepalive_expiry`` too.
    """

    def __init__(
        self,
        base_url: httpx.URL,
        headers: Mapping[str, str],
        context: ssl.SSLContext | None,
        timeout: httpx.Timeout,
        *,
        max_idle: int = 20,
        keepalive_expiry: float = 30.0,
    ) -> None:
        self._scheme = base_url.scheme
        self._host = base_url.host
        self._port = base_url.port
        self._prefix = base_url.raw_path.decode("ascii").rstrip("/")
        self._headers = {"Accept": "*/*", "Connection": "keep-alive", **headers}
        self._context = context
        self._timeout = timeout
        self._max_idle = max_idle
        self._expiry = keepalive_expiry
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()

    @staticmethod
    def usable(base_url: httpx.URL, transport: object, trust_env: bool) -> bool:
        """Whether the lane may serve ``base_url``'s calls: http(s), no custom transport, no proxy."""
        if transport is not None or base_url.scheme not in ("http", "https"):
            return False
        return not (trust_env and urllib.request.getproxies())

    def request(
        self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> httpx.Response:
        """Send one request (``body`` encoded as httpx encodes ``json=``) and read its whole answer."""
        target = self._prefix + path
        if params:
            target += "?" + str(httpx.QueryParams(params))
        headers = dict(self._headers)
        content = None
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
            headers["Content-Length"] = str(len(content))
        elif method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = "0"
        connection = self._take()
        try:
            connection.request(method, target, content, headers)
            answer = connection.getresponse()
            data = answer.read()
        except Exception as exc:
            connection.close()
            raise _transport_error(exc) from exc
        except BaseException:
            connection.close()
            raise
        if answer.will_close:
            connection.close()
        else:
            self._give_back(connection)
        return httpx.Response(answer.status, headers=answer.getheaders(), content=data)

    def close(self) -> None:
        """Close every idle connection; later requests fail."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()

    def _take(self) -> http.client.HTTPConnection:
        now = time.monotonic()
        while True:
            with self._lock:
                if self._closed:
                    raise httpx.ConnectError("the client is closed")
                if self._pid != os.getpid():  # a forked child: the parent's connections are not its own
                    self._pid, inherited, self._idle = os.getpid(), self._idle, []
                    for connection, _ in inherited:
                        connection.close()  # this process's copy of the descriptor only: nothing is sent
                if not self._idle:
                    break
                connection, since = self._idle.pop()
            if now - since < self._expiry and not _closed_by_peer(connection):
                return connection
            connection.close()
        return self._open()

    def _give_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append((connection, time.monotonic()))
                return
        connection.close()

    def _open(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection
        if self._scheme == "https":
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout.connect, context=self._context
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout.connect)
        try:
            connection.connect()
        except Exception as exc:
            connection.close()
            raise _transport_error(exc, connecting=True) from exc
        assert connection.sock is not None
        connection.sock.settimeout(self._timeout.read)
        return connection


def _closed_by_peer(connection: http.client.HTTPConnection) -> bool:
    """An idle connection with anything to read has been closed (or broken) by the server."""
    sock = connection.sock
    if sock is None:
        return True
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _transport_error(exc: Exception, connecting: bool = False) -> httpx.TransportError:
    """The httpx exception httpx would raise for ``exc``, a failure of the connection or the protocol."""
    if isinstance(exc, TimeoutError):
        return httpx.ConnectTimeout(str(exc)) if connecting else httpx.ReadTimeout(str(exc))
    if connecting and isinstance(exc, OSError):
        return httpx.ConnectError(str(exc) or type(exc).__name__)
    if isinstance(exc, http.client.HTTPException | ConnectionError):
        return httpx.RemoteProtocolError(str(exc) or type(exc).__name__)
    return httpx.ReadError(str(exc) or type(exc).__name__)
