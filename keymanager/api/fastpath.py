"""The hot routes without FastAPI's routing and dependency machinery.

Encrypt and decrypt requests are most of the traffic, and FastAPI's per-request machinery
(route matching through every router, dependency solving, response validation) costs more
CPU than the cryptography. :class:`FastPath` recognises those few routes, validates the JSON
body with the route's own pydantic model, and calls the route's own function; the answer,
the audit record and the metrics are the same as through FastAPI. Anything unusual — another
content type, a body the model refuses — goes through FastAPI unchanged, so error answers
(422 messages and all) stay exactly FastAPI's.

``KM_FAST_PATH=false`` leaves it out. tests/api/test_fastpath.py holds it to its word: the hot
routes it finds, by method and path; that requests to them take it (:data:`SERVED`); the same
status, body, headers and audit record as FastAPI for every answer a hot route gives.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keymanager.api.audit_trail import AuditContext
from keymanager.errors import KeyManagerError

Endpoint = Callable[..., Awaitable[Response]]
SERVED = "fast_path"
"""Key of ``scope["state"]``: True when :class:`FastPath` answered the request itself (tests read it)."""


@dataclass(frozen=True)
class FastRoute:
    pattern: re.Pattern[str]
    endpoint: Endpoint
    model: type[BaseModel]
    route: APIRoute


def fast_routes(router: APIRouter, endpoints: Sequence[Callable[..., Any]]) -> list[FastRoute]:
    """The routes of ``router`` whose endpoints are among ``endpoints``, with a pattern for their path.

    Each must be an async POST endpoint taking exactly ``body`` (a pydantic model), ``request``,
    ``trail`` and its path parameters, since :class:`FastPath` calls it so; TypeError otherwise."""
    return [_fast(route) for route in router.routes if isinstance(route, APIRoute) and route.endpoint in endpoints]


def _fast(route: APIRoute) -> FastRoute:
    params = re.findall(r"\{(\w+)\}", route.path)
    model = route.body_field.field_info.annotation if route.body_field is not None else None
    declared = set(inspect.signature(route.endpoint).parameters)
    if (
        not (isinstance(model, type) and issubclass(model, BaseModel))
        or declared != {"body", "request", "trail", *params}
        or route.methods != {"POST"}
        or not inspect.iscoroutinefunction(route.endpoint)
    ):
        raise TypeError(f"{route.path}: a fast route is an async POST endpoint of (body, request, trail, {params})")
    pattern = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", route.path) + "$")
    return FastRoute(pattern, route.endpoint, model, route)


class FastPath:
    """ASGI middleware serving :class:`FastRoute` requests directly (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, routes: list[FastRoute], error_app: Callable[..., ASGIApp]):
        self.app = app
        self.routes = routes
        self.error_app = error_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        for fast in self.routes:
            match = fast.pattern.match(scope["path"])
            if match is not None:
                await self._serve(fast, match.groupdict(), scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _serve(self, fast: FastRoute, params: dict[str, str], scope: Scope, receive: Receive, send: Send) -> None:
        trail: AuditContext = scope["state"]["audit"]
        scope["endpoint"], scope["route"], scope["path_params"] = fast.endpoint, fast.route, params
        scope["state"][SERVED] = True
        try:
            body = await _read_body(receive)
        except KeyManagerError as exc:  # the body limit
            await self.error_app(exc, trail.request_id)(scope, receive, send)
            return
        try:
            model = fast.model.model_validate_json(body)
        except ValidationError:
            scope["state"][SERVED] = False
            await self.app(scope, _replay(body, receive), send)  # FastAPI words the 422
            return
        response: ASGIApp
        try:
            response = await fast.endpoint(body=model, request=Request(scope, receive), trail=trail, **params)
        except KeyManagerError as exc:
            response = self.error_app(exc, trail.request_id)
        await response(scope, receive, send)


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.split(b";")[0].strip().lower() == b"application/json")
    return False


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
