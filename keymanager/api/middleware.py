"""ASGI middleware: a request id on every response (body limits: see ``front_door.py``)."""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


class RequestContext:
    """Give each request an id (``scope["state"]["request_id"]``, header ``X-Request-ID``), and
    answer an unexpected error with the JSON error body and that header."""

    def __init__(self, app: ASGIApp, *, error_app: ErrorResponder) -> None:
        self.app = app
        self.error_app = error_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = next_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        header = (REQUEST_ID_HEADER, request_id.encode())
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # An unexpected error would be answered by Starlette's outermost middleware,
            # outside this one, so without the X-Request-ID header: answer it here instead
            # and let the error go on to be logged.
            if not started:
                await self.error_app(KeyManagerError(), request_id)(scope, receive, send_with_id)
            raise
