"""The one ASGI layer in front of FastAPI: the request context, front door, audit trail and
metrics of every request, and the hot routes answered without FastAPI.

:func:`keymanager.api.app.create_app` returns a :class:`Gateway` around its FastAPI app; it is
what uvicorn serves. Each HTTP request passes, in this order:

1. its context (``api/request_context.py``): the request id and trace context, in the scope's state,
   on every log line and on the answer; its audit context (``api/audit_trail.py``), which the
   route fills;
2. the first of the doors it was given (:class:`HttpDoor`, ``api/app.py`` ``http_doors``) that
   owns the request answers it: ``POST /`` the AWS KMS door (``doors/kms/door.py``), a path holding
   ``/kms/xks/`` the AWS External Key Store door (``doors/xks/door.py``), a path under a Transit mount or
   ``/v1/auth/`` the Vault Transit door (``doors/transit/door.py``), ``/ui`` and below the web console's
   static files (``doors/console/door.py``, with ``KM_UI``). The KMIP door is not one of them: it has a
   listener of its own (``serving/kmip.py``);
3. every other request passes the front door (``api/front_door.py``) before a byte of its body
   is read: names, length, credential; a refusal is answered here;
4. a JSON request to a hot route (``api/fastpath.py``; all of them go to FastAPI with
   ``KM_FAST_PATH=false``) is answered here: its body read, validated with the route's model,
   the route's function called — without FastAPI's middleware, router and dependency solving. A
   body the model refuses, and every other request, goes to FastAPI. Either way the body is cut
   at the front door's limit (413, and the connection closes);
5. the answer's start waits for the record the audit trail owes (503 ``database_unavailable``
   instead when it cannot be written) and carries ``X-Request-ID`` (and ``traceparent``); the
   request is then counted and timed by route template, method and status (``api/metrics.py``)
   and, with ``KM_ACCESS_LOG``, logged.

An unexpected error inside FastAPI is answered there with our JSON 500 (``errors.install``);
one here (in a hot route) is answered here the same way; either goes on to the server, which
logs it. A client that hangs up before its answer completed is one WARNING line and a 499 record.

Why one layer: a middleware per concern wrapped ``send`` and ``receive`` in closures of its own,
and FastAPI put three more middlewares around them; together they cost more CPU per request
than the checks they made. The concerns stay in their own modules, as plain functions and
classes this layer calls.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from fastapi import FastAPI
from starlette.datastructures import State
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from keymanager.api.audit_trail import CLIENT_CLOSED, AuditContext, AuditTrail
from keymanager.api.errors import render, unexpected
from keymanager.api.fastpath import SERVED, FastPath, FastRoute, read_body, replay
from keymanager.api.front_door import FrontDoor
from keymanager.api.logs import request_scope
from keymanager.api.metrics import Metrics
from keymanager.api.request_context import log_access, request_ids, response_ids
from keymanager.errors import KeyManagerError, PayloadTooLarge


class HttpDoor(Protocol):
    """A door beside the REST API (step 2 of the module docstring): an ASGI app that answers every
    request it :meth:`owns` itself — the AWS KMS API, XKS, Vault Transit, the console, and each door
    to come. The gateway is given them as a list, in the order it asks them."""

    def owns(self, scope: Scope) -> bool:
        """Whether the request ``scope`` is this door's."""
        ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


class Gateway:
    """The ASGI app in front of ``app`` (see the module docstring)."""

    def __init__(
        self,
        app: FastAPI,
        *,
        door: FrontDoor,
        trail: AuditTrail,
        metrics: Metrics,
        doors: Sequence[HttpDoor],
        fast: FastPath | None,
        access_log: bool,
    ) -> None:
        self.app = app
        self.door = door
        self.trail = trail
        self.metrics = metrics
        self.fast = fast
        self.access_log = access_log
        self.doors = tuple(doors)
        """The doors beside the REST API, each answering the requests it owns (step 2)."""

    @property
    def state(self) -> State:
        """The FastAPI app's state: the services, the metrics."""
        return self.app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan
            await self.app(scope, receive, send)
            return
        started_at = time.perf_counter()
        headers = dict(reversed(scope["headers"]))  # the first of each name wins
        request_id, traceparent = request_ids(headers)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        if traceparent is not None:
            state["traceparent"] = traceparent
        state["audit"] = trail = self.trail.context(scope, request_id, traceparent)
        exchange = _Exchange(self, scope, receive, send, trail, response_ids(request_id, traceparent), started_at)
        with request_scope(scope):
            try:
                await self._dispatch(exchange, headers)
            except ClientDisconnect:
                exchange.hung_up = True
            except Exception as exc:
                await self._failed(exchange, exc)
                raise
            finally:
                route = getattr(scope.get("route"), "path", "unmatched")
                self.metrics.observe_request(route, scope["method"], exchange.status, time.perf_counter() - started_at)
                if self.access_log and not exchange.logged:
                    log_access(scope, exchange.status, started_at)
            if exchange.hung_up:
                await self.trail.hung_up(trail, recorded=exchange.recorded_hang_up)
        # The audit context and the scope refer to each other: break the cycle, so that the
        # request is freed by reference counting rather than left to the garbage collector.
        del state["audit"]

    async def _dispatch(self, exchange: _Exchange, headers: dict[bytes, bytes]) -> None:
        """Steps 2-4 of the module docstring."""
        scope = exchange.scope
        for door in self.doors:
            if door.owns(scope):
                await door(scope, exchange.receive, exchange.send)
                return
        try:
            exchange.limit = await self.door.admit(scope, headers)
        except KeyManagerError as exc:
            await self.door.refusal(exc, exchange.request_id, headers)(scope, exchange.receive, exchange.send)
            return
        hot = None if self.fast is None else self.fast.match(scope, headers.get(b"content-type"))
        if hot is None:
            await self.app(scope, exchange.receive, exchange.send)
            return
        await self._serve_hot(exchange, *hot)

    async def _serve_hot(self, exchange: _Exchange, fast: FastRoute, params: dict[str, str]) -> None:
        """Answer a request to a hot route: through its function, or FastAPI when its model refuses the body."""
        scope = exchange.scope
        scope["app"], scope["endpoint"], scope["route"], scope["path_params"] = (
            self.app,
            fast.endpoint,
            fast.route,
            params,
        )
        scope["state"][SERVED] = True
        body = b""
        response: Response | None
        try:
            body = await read_body(exchange.receive)
            response = await FastPath.serve(fast, params, body, scope, exchange.receive, exchange.trail)
        except KeyManagerError as exc:
            response = render(exc, exchange.request_id)
        if response is None:
            await self.app(scope, replay(body, exchange.receive), exchange.send)  # FastAPI words the 422
            return
        await response(scope, exchange.receive, exchange.send)

    async def _failed(self, exchange: _Exchange, exc: Exception) -> None:
        """Record (and answer, if nobody did) a request that failed with an unexpected ``exc``."""
        if exchange.started:
            if exchange.status != 500:  # FastAPI's JSON 500 for exc was recorded as it started
                await self.trail.failed(exchange.trail, exc)
            return
        self.trail.note_failure(exchange.trail, exc)
        scope = exchange.scope
        answer = unexpected(exc, exchange.request_id, scope["method"], scope["path"])
        await answer(scope, exchange.receive, exchange.send)


class _Exchange:
    """One HTTP request as the gateway follows it: its ids, audit context and body limit, and what
    became of its answer. :meth:`receive` and :meth:`send` stand between the app and the server."""

    __slots__ = (
        "_receive",
        "_record",
        "_send",
        "access_log",
        "answered",
        "cut",
        "hung_up",
        "ids",
        "limit",
        "logged",
        "received",
        "recorded_hang_up",
        "refused",
        "request_id",
        "scope",
        "started",
        "started_at",
        "status",
        "trail",
    )

    def __init__(
        self,
        gateway: Gateway,
        scope: Scope,
        receive: Receive,
        send: Send,
        trail: AuditContext,
        ids: list[tuple[bytes, bytes]],
        started_at: float,
    ) -> None:
        self.scope, self._receive, self._send = scope, receive, send
        self.trail, self.request_id, self.ids = trail, trail.request_id, ids
        self._record, self.access_log, self.started_at = gateway.trail.record, gateway.access_log, started_at
        self.limit: int | None = None
        self.received = 0
        self.status = 500
        """The status of the answer (500 until one started)."""
        self.cut = self.hung_up = self.started = self.answered = False
        self.recorded_hang_up = self.refused = self.logged = False

    async def receive(self) -> Message:
        """The server's next message; PayloadTooLarge once the body passes the limit."""
        message = await self._receive()
        if message["type"] == "http.request":
            if self.limit is not None:
                self.received += len(message.get("body", b""))
                if self.received > self.limit:
                    self.cut = True
                    raise PayloadTooLarge("request body too large")
        elif message["type"] == "http.disconnect" and not self.answered:
            self.hung_up = True
        return message

    async def send(self, message: Message) -> None:
        """Pass ``message`` to the server: the answer's start once its audit record is written (or
        503 instead), with the request's ids."""
        if self.refused:  # the audit record could not be written: the 503 went instead
            return
        if message["type"] == "http.response.start":
            self.recorded_hang_up = self.hung_up
            recorded = CLIENT_CLOSED if self.hung_up else message["status"]
            try:
                if self.trail.owes_record(recorded):
                    await self._record(self.trail, recorded)
            except KeyManagerError as exc:
                self.refused = True
                await self._answer(render(exc, self.request_id))
                return
            self.started, self.status = True, message["status"]
            message["headers"] = [*message.get("headers", ()), *self.ids]
            if self.cut:  # the rest of the body is never read
                message["headers"].append((b"connection", b"close"))
        elif not message.get("more_body", False):
            self._answered()
        await self._send(message)

    async def _answer(self, response: Response) -> None:
        """Send ``response`` itself (it has a body), with the request's ids."""
        self.started, self.status = True, response.status_code
        await self._send(
            {"type": "http.response.start", "status": self.status, "headers": [*response.raw_headers, *self.ids]}
        )
        self._answered()
        await self._send({"type": "http.response.body", "body": response.body})

    def _answered(self) -> None:
        """The last of the body is about to leave: the access line goes first, there when the client has the answer."""
        self.answered = True
        if self.access_log:
            self.logged = True
            log_access(self.scope, self.status, self.started_at)
