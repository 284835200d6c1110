"""One audit record for every request to an audited route, written before the answer leaves.

A route is audited when its endpoint is decorated with :func:`audited`, which names its action
— the only place the action is written. While the request runs, the route and its dependencies
fill the request's :class:`AuditContext` (principal, key, version, details); the path's
parameters (the key, the principal's name …) are in every record of the request already.

Who writes the record is decided in one place, :meth:`AuditContext.owes_record`:

- a route whose success is recorded with the change itself — in the transaction that makes
  it, or by ``run_validated`` before the route answers — takes that record from
  :meth:`AuditContext.success`. Its status is the route's declared success status (its
  ``status_code``, 200 by default): the record commits before the response exists, and the
  route can only answer that status once it committed;
- every other answer (reads, refusals, failures, a change that failed after taking its record)
  is recorded by :class:`AuditTrail` when the response starts, with the response's status and
  an outcome derived from it. If the record cannot be written, the client gets 503
  ``database_unavailable`` instead of the answer (fail closed).

A request that fails after its answer started (a stream cut mid-way) is recorded with the
status and code of the :class:`KeyManagerError` that caused it, 500 for anything else. A client that
hangs up before the answer completed (mid-upload or mid-download) is recorded with status 499
and logged as one WARNING line, without a traceback.

The AWS KMS door (``api/kms.py``) has no routes: it declares each call's action on the context
(:attr:`AuditContext.declared`) and writes its own records, so that a failed write answers in
AWS's error shape.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.errors import DatabaseUnavailable, KeyManagerError
from keymanager.services.audit import AuditWriter

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


def _declared_action(scope: Scope) -> str | None:
    """The action the request's route declared with :func:`audited` (None: not an audited route)."""
    return getattr(scope.get("endpoint"), _ATTRIBUTE, None)


class Located(Protocol):
    """A result naming the key version it used."""

    @property
    def key_id(self) -> str: ...

    @property
    def key_version(self) -> int: ...


@dataclass(slots=True)
class AuditContext:
    """What the request has learnt that its audit record should say (slots: a misspelt or retired
    field, such as the old hand-set ``recorded`` flag, fails at once instead of being ignored)."""

    request_id: str
    client: str | None
    scope: Scope = field(default_factory=dict, repr=False)
    declared: str | None = None
    """The action of a request served without a route (the KMS door's calls)."""
    principal: str | None = None
    key_id: str | None = None
    key_version: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    _success_taken: bool = field(default=False, repr=False)

    @property
    def action(self) -> str:
        """The audited action: the route's (:func:`audited`) or the declared one."""
        return self.declared or _declared_action(self.scope) or "unaudited"

    def success(self, about: Located | None = None, **details: Any) -> AuditEntry:
        """The record of this request's success (naming the key version ``about`` used, with
        ``details`` added), for the caller to commit with its change before it answers.

        Its status is the route's declared success status; the trail writes no other record of a
        success (see the module docstring)."""
        if about is not None:
            self.key_id, self.key_version = about.key_id, about.key_version
        self.details.update(details)
        self._success_taken = True
        route = self.scope.get("route")
        return self.entry(getattr(route, "status_code", None) or 200)

    def entry(self, status: int) -> AuditEntry:
        """The audit entry of this request answered with ``status``."""
        return AuditEntry(
            time=datetime.now(UTC),
            action=self.action,
            outcome=outcome_of(status),
            status=status,
            request_id=self.request_id,
            principal=self.principal,
            key_id=self.key_id,
            key_version=self.key_version,
            client=self.client,
            details={**self.scope.get("path_params", {}), **self.details},
        )

    @property
    def key_ref(self) -> str | None:
        """The key named in the request's path (by name or id), if any."""
        ref = self.scope.get("path_params", {}).get("key")
        return ref if isinstance(ref, str) else None

    def owes_record(self, status: int) -> bool:
        """Whether the trail must write this request's record for an answer of ``status``: for an
        audited route, unless the answer is a success whose record :meth:`success` gave out."""
        return _declared_action(self.scope) is not None and not (self._success_taken and status < 400)


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
        context = AuditContext(request_id="", client=None, scope=request.scope)
    return context  # type: ignore[no-any-return]


def error_of(exc: BaseException) -> KeyManagerError | None:
    """The KeyManagerError ``exc`` is or was raised from (a stream cut after its answer started)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, KeyManagerError):
            return cause
        cause = cause.__cause__
    return None


class AuditTrail:
    """ASGI middleware writing the audit record of each audited request (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        writer: Callable[[], AuditWriter],
        key_id: Callable[[str], str | None],
        error_app: Callable[..., ASGIApp],
    ) -> None:
        self.app = app
        self.writer = writer
        self.key_id = key_id
        self.error_app = error_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        client = scope.get("client")
        context = AuditContext(
            request_id=state.get("request_id", ""), client=client[0] if client else None, scope=scope
        )
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
                    await self._record(context, CLIENT_CLOSED if hung_up else message["status"])
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
        except Exception as exc:
            error = error_of(exc)
            if error is not None:
                context.details["error"] = error.code
            with contextlib.suppress(KeyManagerError):  # the request failed already; its error goes on
                await self._record(context, 500 if error is None else error.status)
            raise
        if hung_up:
            await self._hung_up(context, recorded=recorded_hang_up)

    async def _hung_up(self, context: AuditContext, *, recorded: bool) -> None:
        """One WARNING line and (unless the answer's start recorded it already) a 499 record."""
        log.warning("client hung up before its answer completed (%s, request %s)", context.action, context.request_id)
        if not recorded:
            with contextlib.suppress(KeyManagerError):  # nobody is left to answer
                await self._record(context, CLIENT_CLOSED)

    async def _record(self, context: AuditContext, status: int) -> None:
        if not context.owes_record(status):
            return
        if context.key_id is None and context.key_ref is not None:
            # Refused before the route learnt the key's id: name the key by id all the same.
            context.key_id = await run_in_threadpool(self.key_id, context.key_ref)
        try:
            await self.writer().awrite(context.entry(status))
        except KeyManagerError:
            raise
        except Exception:
            raise DatabaseUnavailable("the audit record could not be written") from None
