"""One audit record for every request to an audited route, written before the answer leaves.

A route is audited when its endpoint is decorated with :func:`audited`. While the request
runs, the route and its dependencies fill the request's :class:`AuditContext` (principal,
key, version, details). When the response starts, :class:`AuditTrail` writes the record —
with the status and an outcome derived from it — and waits for the commit. If the record
cannot be written, the client gets 503 ``database_unavailable`` instead of the answer
(fail closed). Changes that are recorded in the same transaction as the change itself mark
the context ``recorded``, and the trail writes nothing more for them.

A client that hangs up before the answer completed (mid-upload or mid-download) is recorded
with status 499 and logged as one WARNING line, without a traceback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.errors import DatabaseUnavailable, KeyManagerError
from keymanager.services.audit import AuditLog

F = TypeVar("F", bound=Callable[..., Any])
_ATTRIBUTE = "__km_audit_action__"
CLIENT_CLOSED = 499
"""The status recorded when the client hung up before its answer completed (nginx's code)."""
log = logging.getLogger(__name__)


def audited(action: str) -> Callable[[F], F]:
    """Mark a route's endpoint as audited under ``action`` (e.g. ``key.encrypt``)."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, _ATTRIBUTE, action)
        return endpoint

    return mark


@dataclass
class AuditContext:
    """What the request has learnt that its audit record should say."""

    request_id: str
    client: str | None
    principal: str | None = None
    key_id: str | None = None
    key_version: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    recorded: bool = False

    def entry(self, action: str, status: int) -> AuditEntry:
        """The audit entry for ``action`` answered with ``status``."""
        return AuditEntry(
            time=datetime.now(UTC),
            action=action,
            outcome=outcome_of(status),
            status=status,
            request_id=self.request_id,
            principal=self.principal,
            key_id=self.key_id,
            key_version=self.key_version,
            client=self.client,
            details=dict(self.details),
        )


def outcome_of(status: int) -> Outcome:
    if status < 400:
        return Outcome.OK
    if status in (401, 403):
        return Outcome.DENIED
    return Outcome.ERROR


async def audit_context(request: Request) -> AuditContext:
    """The request's audit context (made by :class:`AuditTrail`)."""
    context = request.scope.get("state", {}).get("audit")
    if context is None:  # an app without the trail (should not happen): a throwaway context
        context = AuditContext(request_id="", client=None)
    return context  # type: ignore[no-any-return]


def action_of(request: Request) -> str:
    """The audit action of the request's route."""
    return str(getattr(request.scope.get("endpoint"), _ATTRIBUTE, "unknown"))


class AuditTrail:
    """ASGI middleware writing the audit record of each audited request (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        log: Callable[[], AuditLog],
        key_id: Callable[[str], str | None],
        error_app: Callable[..., ASGIApp],
    ) -> None:
        self.app = app
        self.log = log
        self.key_id = key_id
        self.error_app = error_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        client = scope.get("client")
        context = AuditContext(request_id=state.get("request_id", ""), client=client[0] if client else None)
        if "traceparent" in state:  # validated, 55 characters (api/middleware.py)
            context.details["traceparent"] = state["traceparent"]
        state["audit"] = context
        refused = answered = hung_up = recorded_hang_up = False

        async def watch_receive() -> Message:
            nonlocal hung_up
            message = await receive()
            hung_up = hung_up or (message["type"] == "http.disconnect" and not answered)
            return message

        async def send_after_audit(message: Message) -> None:
            nonlocal refused, answered, recorded_hang_up
            if refused:
                return
            if message["type"] == "http.response.start":
                recorded_hang_up = hung_up
                try:
                    await self._record(scope, context, CLIENT_CLOSED if hung_up else message["status"])
                except KeyManagerError as exc:
                    refused = True
                    await self.error_app(exc, context.request_id)(scope, receive, send)
                    return
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        try:
            await self.app(scope, watch_receive, send_after_audit)
        except ClientDisconnect:
            hung_up = True
        except Exception:
            with contextlib.suppress(KeyManagerError):  # the request failed already; its error goes on
                await self._record(scope, context, 400 if "aborted" in context.details else 500)
            raise
        if hung_up:
            await self._hung_up(scope, context, recorded=recorded_hang_up)

    async def _hung_up(self, scope: Scope, context: AuditContext, *, recorded: bool) -> None:
        """One WARNING line and (unless the answer's start recorded it already) a 499 record."""
        action = getattr(scope.get("endpoint"), _ATTRIBUTE, "unaudited")
        log.warning("client hung up before its answer completed (%s, request %s)", action, context.request_id)
        if not recorded:
            with contextlib.suppress(KeyManagerError):  # nobody is left to answer
                await self._record(scope, context, CLIENT_CLOSED)

    async def _record(self, scope: Scope, context: AuditContext, status: int) -> None:
        action = getattr(scope.get("endpoint"), _ATTRIBUTE, None)
        if action is None or (context.recorded and status < 400):
            return
        if context.key_id is None and isinstance(context.details.get("key"), str):
            # Refused before the route learnt the key's id: name the key by id all the same.
            context.key_id = await run_in_threadpool(self.key_id, context.details["key"])
        try:
            await self.log().awrite(context.entry(action, status))
        except KeyManagerError:
            raise
        except Exception:
            raise DatabaseUnavailable("the audit record could not be written") from None
