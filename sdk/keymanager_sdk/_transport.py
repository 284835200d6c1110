"""The JSON calls of both clients, over urllib3's connection pool.

An encrypt or decrypt is one small JSON request and one small JSON answer; httpx's general
machinery (URL and header models, h11's state machine, anyio's TLS streams for the async client)
costs more client CPU than the service spends on the request. Measured on the 2-core development
machine against a real server over TLS (``python -m bench client``, ``bench/README.md``): a 1 KB
encrypt takes ~0.45-0.6 ms of client CPU here, ~0.7-1.1 ms through ``httpx.Client`` and ~1.4-1.8 ms
through ``httpx.AsyncClient``. ``AsyncKeyManager`` runs these calls in its own bounded thread pool.

:class:`JsonTransport` is thread-safe. It keeps at most ``max_connections`` connections to the
service (a caller waits up to the pool timeout for a free one), notices a connection the server
closed while idle before reusing it, honours ``HTTP(S)_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``
when ``trust_env``, and drops the connections a forked child inherited from its parent. urllib3
never retries here: the clients decide (``_core.Core.retry_delay``). Failures are raised as
``urllib3.exceptions.HTTPError`` (or ``OSError``) for the client to translate.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import urllib3

from keymanager_sdk import _connection

TRANSPORT_ERRORS = (httpx.TransportError, urllib3.exceptions.HTTPError, OSError)
"""What sending a call may raise when the service gives no answer (the clients make it a ``TransportError``)."""


class Answer:
    """A whole answer read from the service: what ``_core`` reads of a response."""

    __slots__ = ("content", "headers", "reason_phrase", "status_code")

    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes, reason_phrase: str) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content
        self.reason_phrase = reason_phrase

    def json(self) -> Any:
        """The body decoded as JSON (``ValueError`` when it is not)."""
        return json.loads(self.content)


def proxy_for(url: str, trust_env: bool) -> str | None:
    """The proxy URL the environment names for ``url`` (None: connect directly, also under ``NO_PROXY``)."""
    if not trust_env:
        return None
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None
    host = parts.netloc.rpartition("@")[2]
    if urllib.request.proxy_bypass(host):  # NO_PROXY / no_proxy
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class JsonTransport:
    """A pool of keep-alive connections to one service, for requests with a JSON body (or none)."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        context: ssl.SSLContext,
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        pool_timeout: float | None,
        max_connections: int,
        trust_env: bool = True,
    ) -> None:
        parts = urlsplit(base_url)
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.origin = _connection.origin(base_url)
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Accept": "*/*", **headers}
        self._context = context
        self._timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self._pool_timeout = pool_timeout
        self._size = max_connections
        self.proxy = proxy_for(base_url, trust_env)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._pool = self._new_pool()

    def _new_pool(self) -> urllib3.HTTPConnectionPool | urllib3.PoolManager:
        tls: dict[str, Any] = {}
        if self.scheme == "https":
            tls = {"ssl_context": self._context}
            if not self._context.check_hostname:
                tls["assert_hostname"] = False
            if self._context.verify_mode == ssl.CERT_NONE:
                tls["cert_reqs"] = "CERT_NONE"
        options: dict[str, Any] = {"maxsize": self._size, "block": True, "timeout": self._timeout, **tls}
        if self.proxy is not None:
            return urllib3.ProxyManager(self.proxy, num_pools=1, **options)
        if self.scheme == "https":
            return urllib3.HTTPSConnectionPool(self.host, self.port, **options)
        return urllib3.HTTPConnectionPool(self.host, self.port, **options)

    def _current(self) -> urllib3.HTTPConnectionPool | urllib3.PoolManager:
        if self._pid == os.getpid():
            return self._pool
        with self._lock:  # a forked child: the parent's connections (and TLS sessions) are not its own
            if self._pid != os.getpid():
                self._pid, self._pool = os.getpid(), self._new_pool()  # the old sockets close with it, sending nothing
            return self._pool

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """Send one request (``body`` encoded as JSON, with ``extra_headers``) and read its whole answer."""
        if self._closed:
            raise urllib3.exceptions.HTTPError("the client is closed")
        target = self._prefix + path
        if params:
            target += "?" + urlencode(params)
        headers = self._headers if not extra_headers else {**self._headers, **extra_headers}
        content = None
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            headers = {**headers, "Content-Type": "application/json"}
        pool = self._current()
        url = target if self.proxy is None else self.origin + target
        answer = pool.urlopen(
            method,
            url,
            body=content,
            headers=headers,
            retries=False,
            redirect=False,
            assert_same_host=False,
            pool_timeout=self._pool_timeout,  # type: ignore[arg-type]  # a float works: it goes to queue.get
        )
        return Answer(answer.status, answer.headers, answer.data, answer.reason or "")

    def close(self) -> None:
        """Close every idle connection; later requests fail."""
        self._closed = True
        if isinstance(self._pool, urllib3.PoolManager):
            self._pool.clear()
        else:
            self._pool.close()


def json_transport(
    base_url: str,
    headers: Mapping[str, str],
    context: ssl.SSLContext,
    timeout: httpx.Timeout,
    limits: httpx.Limits,
    trust_env: bool,
) -> JsonTransport:
    """The transport of a client built with these httpx-style ``timeout`` and ``limits``.

    ``limits.max_connections`` bounds the connections (100 when None); the connect timeout
    also bounds sending the request, as urllib3 applies it until the request is sent.
    """
    return JsonTransport(
        base_url,
        headers,
        context,
        connect_timeout=timeout.connect,
        read_timeout=timeout.read,
        pool_timeout=timeout.pool,
        max_connections=limits.max_connections or 100,
        trust_env=trust_env,
    )
