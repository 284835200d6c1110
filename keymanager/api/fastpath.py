"""The hot routes without FastAPI.

Encrypt, decrypt and sign requests are most of the traffic, and FastAPI's per-request machinery
(its middleware, route matching through every router, dependency solving, response validation)
costs more CPU than the cryptography. The gateway (``api/gateway.py``) has :class:`FastPath`
recognise those few routes, decode the JSON body as FastAPI would (strict: ``api/json_bodies.py``),
validate it with the route's own pydantic model and call the route's own function; the answer,
the audit record and the metrics are the same as through FastAPI. Anything unusual — another
content type, a body the model refuses — goes through FastAPI unchanged, so error answers (422
messages and all) stay exactly FastAPI's.

The fast path runs no dependency: a hot route with one besides its audit context (a role guard in
``dependencies=[...]``, the router's own, one inside another) is left to FastAPI, which runs it,
so a guard added to a hot route is never skipped (``tests/security/test_fast_path_guards.py``);
``tests/api/test_fastpath.py`` then notices the route is no longer fast.

``KM_FAST_PATH=false`` leaves it out. tests/api/test_fastpath.py holds it to its word: the hot
routes it finds, by method and path; that requests to them take it (:data:`SERVED`); the same
status, body, headers and audit record as FastAPI for every answer a hot route gives.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import Message, Receive, Scope

from keymanager.api.audit_trail import AuditContext, audit_context
from keymanager.api.json_bodies import decoded

Endpoint = Callable[..., Awaitable[Response]]
SERVED = "fast_path"
"""Key of ``scope["state"]``: True when the fast path answered the request itself (tests read it)."""


@dataclass(frozen=True)
class FastRoute:
    pattern: re.Pattern[str]
    endpoint: Endpoint
    model: type[BaseModel]
    route: APIRoute


def fast_routes(routers: Iterable[APIRouter], endpoints: Sequence[Callable[..., Any]]) -> list[FastRoute]:
    """The routes of ``routers`` whose endpoints are among ``endpoints``, with a pattern for their path,
    less those with a dependency the fast path would not run (:func:`runs_dependencies`).

    Each must be an async POST endpoint taking exactly ``body`` (a pydantic model), ``request``,
    ``trail`` and its path parameters, since :class:`FastPath` calls it so; TypeError otherwise."""
    return [
        _fast(route)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and route.endpoint in endpoints and not runs_dependencies(route)
    ]


def runs_dependencies(route: APIRoute) -> bool:
    """Whether FastAPI runs a dependency for ``route`` besides the ``trail`` parameter's audit
    context (which :class:`FastPath` provides itself): route or router ``dependencies``, another
    ``Depends`` parameter, a sub-dependency."""
    return any(
        dependency.name != "trail" or dependency.call is not audit_context or dependency.dependencies
        for dependency in route.dependant.dependencies
    )


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
    """The hot routes (see the module docstring): the gateway (``api/gateway.py``) asks :meth:`match`
    of each request it admitted and has a matching one served by :meth:`serve`."""

    def __init__(self, routes: list[FastRoute]) -> None:
        self.routes = routes

    def match(self, scope: Scope, content_type: bytes | None) -> tuple[FastRoute, dict[str, str]] | None:
        """The fast route of a JSON ``POST`` (``content_type``: its ``Content-Type``) and its path
        parameters; None for any other request."""
        if scope["method"] != "POST" or content_type is None or not _is_json(content_type):
            return None
        path = scope["path"]
        for fast in self.routes:
            match = fast.pattern.match(path)
            if match is not None:
                return fast, match.groupdict()
        return None

    @staticmethod
    async def serve(
        fast: FastRoute, params: dict[str, str], body: bytes, scope: Scope, receive: Receive, trail: AuditContext
    ) -> Response | None:
        """The route's answer to ``body``; None when it is not JSON or the route's model refuses it
        (FastAPI then words the 422). A KeyManagerError of the route is raised, and InvalidRequest
        for an object naming a key twice (``api/json_bodies.py``, as through FastAPI)."""
        try:
            model = fast.model.model_validate(decoded(body))
        except (ValueError, ValidationError):
            scope["state"][SERVED] = False
            return None
        return await fast.endpoint(body=model, request=Request(scope, receive), trail=trail, **params)


def _is_json(content_type: bytes) -> bool:
    return content_type.split(b";")[0].strip().lower() == b"application/json"


async def read_body(receive: Receive) -> bytes:
    """The whole body of the request (what came before a hang-up, if the client hung up)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for an app that reads the request again: ``body`` first, then what ``receive`` says."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
