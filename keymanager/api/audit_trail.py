"""One audit record for every request to an audited route, written before the answer leaves.

A route is audited when its endpoint is decorated with :func:`audited`, which names its action
— the only place the action is written. While the request runs, the route and its dependencies
fill the request's :class:`AuditContext` (principal, key, version, details); the path's
parameters (the key, the principal's name …) are in every record of the request already.

Which record a request owes is decided in one place for every door, ``AuditLog.owed``
(``services/audit_log.py``); :meth:`AuditContext.owes_record` gives it this door's facts:

- a route whose success is recorded with the change itself — in the transaction that makes
  it, or by ``run_validated`` before the route answers — takes that record from
  :meth:`AuditContext.success`. Its status is the route's declared success status (its
  ``status_code``, 200 by default): the record commits before the response exists, and the
  route can only answer that status once it committed;
- every other answer (reads, refusals, failures, a change that failed after taking its record)
  is recorded by :class:`AuditTrail` (through ``AuditLog.settle``) when the response starts,
  with the response's status and an outcome derived from it. If the record cannot be written,
  the client gets 503 ``database_unavailable`` instead of the answer (fail closed);
- a request the front door refused before its route was known (names, length, credential)
  owes no record of its own: a failed authentication is summarised (``api/front_door.py``).

A request that fails after its answer started (a stream cut mid-way) is recorded with the
status and code of the :class:`KeyManagerError` that caused it, 500 for anything else; one that
fails unexpectedly before is recorded with the JSON 500 it is answered with. A client that
hangs up before the answer completed (mid-upload or mid-download) is recorded with status 499
and logged as one WARNING line, without a traceback.

The AWS KMS door (``doors/kms/door.py``) has no routes: it declares each call's action on the context
(:attr:`AuditContext.declared`) and asks ``AuditLog`` itself when it answers, so that a failed
write answers in AWS's error shape.
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
from starlette.types import Scope

from keymanager.domain.audit import AuditEntry, outcome_of
from keymanager.errors import KeyManagerError
from keymanager.services.audit_log import AuditLog, Owed

F = TypeVar("F", bound=Callable[..., Any])
_ATTRIBUTE = "__km_audit_action__"
_UNAUDITED = "__km_unaudited_action__"
CLIENT_CLOSED = 499
"""The status recorded when the client hung up before its answer completed (nginx's code)."""
log = logging.getLogger(__name__)


def audited(action: str) -> Callable[[F], F]:
    """Mark a route's endpoint as audited under ``action`` (e.g. ``key.encrypt``)."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, _ATTRIBUTE, action)
        return endpoint

    return mark


def unaudited(action: str) -> Callable[[F], F]:
    """Name the action of a route's endpoint that writes no audit record (reading the audit log or
    the metrics): the action its caller is authorized for (``services/authorization.py``)."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, _UNAUDITED, action)
        return endpoint

    return mark


def _declared_action(scope: Scope) -> str | None:
    """The action the request's route declared with :func:`audited` or :func:`unaudited` (None: the
    route declared none, e.g. a public one); whether it is audited is the rights table's say."""
    endpoint = scope.get("endpoint")
    return getattr(endpoint, _ATTRIBUTE, None) or getattr(endpoint, _UNAUDITED, None)


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
        """The request's action: the declared one, else the route's (:func:`audited`, :func:`unaudited`)."""
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

    @property
    def success_taken(self) -> bool:
        """Whether :meth:`success` gave out this request's success record."""
        return self._success_taken

    def not_run(self, **details: Any) -> None:
        """The success record given out was not committed: the call did not run (a guarded call awaiting
        its approvals), so the trail writes the answer's record, with ``details``."""
        self._success_taken = False
        self.details.update(details)

    def owes_record(self, status: int) -> bool:
        """Whether the trail must write this request's record for an answer of ``status``
        (``AuditLog.owed``: for an audited route, unless the answer is a success whose record
        :meth:`success` gave out)."""
        owed = AuditLog.owed(
            _declared_action(self.scope),
            authenticated=True,  # the front door refuses the unauthenticated before any route is known
            success_taken=self._success_taken,
            status=status,
        )
        return owed is Owed.ANSWER


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
    """Writes the records the answers of audited requests owe (see the module docstring); the
    gateway (``api/gateway.py``) calls it as a request's answer starts, fails or is abandoned."""

    def __init__(self, *, log: Callable[[], AuditLog], key_id: Callable[[str], str | None]) -> None:
        self.log = log
        self.key_id = key_id

    @staticmethod
    def context(scope: Scope, request_id: str, traceparent: str | None) -> AuditContext:
        """The audit context of the request ``scope``, which its route fills."""
        client = scope.get("client")
        context = AuditContext(request_id=request_id, client=client[0] if client else None, scope=scope)
        if traceparent is not None:  # validated, 55 characters (api/request_context.py)
            context.details["traceparent"] = traceparent
        return context

    async def record(self, context: AuditContext, status: int) -> None:
        """Write the record the answer ``status`` owes, if any; DatabaseUnavailable (or the audit
        log's own error) when it cannot be written: the answer must not leave."""

        async def entry() -> AuditEntry:
            if context.key_id is None and context.key_ref is not None:
                # Refused before the route learnt the key's id: name the key by id all the same.
                context.key_id = await run_in_threadpool(self.key_id, context.key_ref)
            return context.entry(status)

        settled = await self.log().settle(
            _declared_action(context.scope),
            authenticated=True,  # the front door refuses the unauthenticated before any route is known
            success_taken=context.success_taken,
            status=status,
            entry=entry,
        )
        if settled.error is not None:
            raise settled.error

    async def failed(self, context: AuditContext, exc: BaseException) -> None:
        """Record a request that failed with ``exc`` after its answer started: the status and code of
        the KeyManagerError it came from, else 500. The request failed already, so a record that
        cannot be written changes nothing."""
        error = self.note_failure(context, exc)
        with contextlib.suppress(KeyManagerError):
            await self.record(context, 500 if error is None else error.status)

    @staticmethod
    def note_failure(context: AuditContext, exc: BaseException) -> KeyManagerError | None:
        """Name in the request's record the code of the KeyManagerError ``exc`` came from (returned), if any."""
        error = error_of(exc)
        if error is not None:
            context.details["error"] = error.code
        return error

    async def hung_up(self, context: AuditContext, *, recorded: bool) -> None:
        """One WARNING line and (unless the answer's start recorded it already) a 499 record."""
        log.warning("client hung up before its answer completed (%s, request %s)", context.action, context.request_id)
        if not recorded:
            with contextlib.suppress(KeyManagerError):  # nobody is left to answer
                await self.record(context, CLIENT_CLOSED)
