"""ASGI middleware: a request id on every response, and the request body limit."""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keymanager.errors import KeyManagerError, PayloadTooLarge

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
    """Give each request an id (``scope["state"]["request_id"]``, header ``X-Request-ID``) and
    refuse bodies over ``max_body`` bytes with 413, whether or not they announce a length.
    Paths ending in ``/batch`` have the larger limit ``max_batch_body``; paths ending in
    ``/stream`` carry large blobs and are exempt from the body limit."""

    def __init__(self, app: ASGIApp, *, max_body: int, max_batch_body: int, error_app: ErrorResponder) -> None:
        self.app = app
        self.max_body = max_body
        self.max_batch_body = max_batch_body
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

        if scope["path"].endswith("/stream"):
            await self.app(scope, receive, send_with_id)
            return
        limit = self.max_batch_body if scope["path"].endswith("/batch") else self.max_body
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await self.error_app(PayloadTooLarge("request body too large"), request_id)(
                    scope, receive, send_with_id
                )
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLarge("request body too large")
            return message

        try:
            await self.app(scope, limited_receive, send_with_id)
        except Exception:
            # An unexpected error would be answered by Starlette's outermost middleware,
            # outside this one, so without the X-Request-ID header: answer it here instead
            # and let the error go on to be logged.
            if not started:
                await self.error_app(KeyManagerError(), request_id)(scope, receive, send_with_id)
            raise
