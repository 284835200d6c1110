"""ASGI middleware: a request id (and W3C trace context) on every request, response and log line
(body limits: see ``front_door.py``).

A client's ``X-Request-ID`` is kept when it is 1-64 characters of ``[A-Za-z0-9._-]``, else
replaced by one of ours; a ``traceparent`` is kept when it is valid per W3C Trace Context
(``version-traceid-parentid-flags``, lower-case hex, no all-zero ids, version ``ff`` invalid),
else dropped. Both are echoed on the response and appear in the logs and the audit record.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import secrets
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keymanager.api.logs import ACCESS_LOGGER, request_fields, request_scope
from keymanager.errors import KeyManagerError

ErrorResponder = Callable[[KeyManagerError, str], ASGIApp]

_PROCESS_PREFIX = secrets.token_hex(8)
_SEQUENCE = itertools.count()


def _new_prefix_after_fork() -> None:
    global _PROCESS_PREFIX
    _PROCESS_PREFIX = secrets.token_hex(8)


os.register_at_fork(after_in_child=_new_prefix_after_fork)


def next_request_id() -> str:
    """A request id: 32 hex digits, a random per-process prefix and a counter (uuid4 per request
    costs a system call; ids need to be unique, not secret)."""
    return f"{_PROCESS_PREFIX}{next(_SEQUENCE) & 0xFFFF_FFFF_FFFF_FFFF:016x}"


REQUEST_ID_HEADER = b"x-request-id"
TRACEPARENT_HEADER = b"traceparent"
_REQUEST_ID = re.compile(rb"[A-Za-z0-9._-]{1,64}")
_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?", re.DOTALL)
access_log = logging.getLogger(ACCESS_LOGGER)


def client_request_id(value: bytes | None) -> str | None:
    """The client's ``X-Request-ID`` when it is 1-64 characters of ``[A-Za-z0-9._-]``; else None."""
    if value is not None and _REQUEST_ID.fullmatch(value):
        return value.decode()
    return None


def valid_traceparent(value: bytes | None) -> str | None:
    """The W3C ``traceparent`` header when valid (its first four fields for a later version); else None.

    Version ``00`` is exactly ``00-<32 hex>-<16 hex>-<2 hex>``; a later version (``01``-``fe``) may
    carry more fields after a ``-``, which are not kept; ids of all zeros and upper case are invalid.
    """
    if value is None or len(value) > 512:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace_id, parent_id, _, rest = match.groups()
    if version == b"ff" or (version == b"00" and rest is not None):
        return None
    if trace_id == b"0" * 32 or parent_id == b"0" * 16:
        return None
    return value[:55].decode()


class RequestContext:
    """Give each request an id (``scope["state"]["request_id"]``, header ``X-Request-ID``) and its
    trace context (``scope["state"]["traceparent"]``); set the log fields of the request; with
    ``access_log``, log one line per request; answer an unexpected error with the JSON error body
    and those headers."""

    def __init__(self, app: ASGIApp, *, error_app: ErrorResponder, access_log: bool = False) -> None:
        self.app = app
        self.error_app = error_app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started_at = time.perf_counter()
        incoming = dict(_ids_of(scope["headers"]))
        request_id = client_request_id(incoming.get(REQUEST_ID_HEADER)) or next_request_id()
        traceparent = valid_traceparent(incoming.get(TRACEPARENT_HEADER))
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        headers = [(REQUEST_ID_HEADER, request_id.encode())]
        if traceparent is not None:
            state["traceparent"] = traceparent
            headers.append((TRACEPARENT_HEADER, traceparent.encode()))
        status = 500
        started = logged = False

        async def send_with_id(message: Message) -> None:
            nonlocal started, status, logged
            if message["type"] == "http.response.start":
                started, status = True, message["status"]
                message["headers"] = [*message.get("headers", []), *headers]
            elif self.access_log and not message.get("more_body", False):
                logged = True  # before the last of the body leaves: the line is there when the client has the answer
                self._log(scope, status, started_at)
            await send(message)

        with request_scope(scope):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                # An unexpected error would be answered by Starlette's outermost middleware,
                # outside this one, so without the X-Request-ID header: answer it here instead
                # and let the error go on to be logged.
                if not started:
                    await self.error_app(KeyManagerError(), request_id)(scope, receive, send_with_id)
                raise
            finally:
                if self.access_log and not logged:
                    self._log(scope, status, started_at)

    @staticmethod
    def _log(scope: Scope, status: int, started_at: float) -> None:
        duration_ms = round((time.perf_counter() - started_at) * 1000, 3)
        fields = {**request_fields(scope), "status": status, "duration_ms": duration_ms}
        access_log.info("%s %s %d", scope["method"], fields.get("route") or fields.get("path"), status, extra=fields)


def _ids_of(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request-id and traceparent headers among ``headers`` (the first of each wins)."""
    found: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        if name in (REQUEST_ID_HEADER, TRACEPARENT_HEADER) and all(name != n for n, _ in found):
            found.append((name, value))
    return found
