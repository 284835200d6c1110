"""The front door: what a request must pass before a byte of its body is read.

In this order, for every HTTP request (:class:`FrontDoor`):

1. A key or principal named in the URL must follow the contract's name rules (400
   ``invalid_request``), so nothing longer than a name reaches a query, a cache or an audit record.
2. A ``Content-Length`` over the route's limit is refused with 413.
3. The caller authenticates — bearer token or verified TLS client certificate — except on the
   public routes (:data:`PUBLIC_PATHS`). An unknown credential is 401; an address that failed too
   often is 429 with ``Retry-After`` (see ``services/throttle.py``) unless its credential is
   already known. The principal's credential goes into ``scope["state"]["credential"]``, where
   the route's own authentication (``api/deps.py``) reads it.
4. Only then is the body read, and cut at the route's limit: ``max_json`` for every route but
   the two batch routes (``max_batch``) and the two stream routes (no limit; they check the
   key's policy before they keep anything).

Refusals sent while a body may still be on its way close the connection (``Connection: close``),
so the rest of the body is never read. Failed authentications are audited as summaries, at most
one record per client address per interval.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.domain.credentials import Credential
from keymanager.domain.names import KEY_REF_RULE, PRINCIPAL_NAME_RULE, is_key_ref, is_principal_name
from keymanager.errors import InvalidRequest, KeyManagerError, PayloadTooLarge, RateLimited, Unauthenticated
from keymanager.services.container import Services
from keymanager.services.throttle import AuthThrottle, FailureSummary

PUBLIC_PATHS = frozenset({"/v1/health", "/v1/ready", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
"""Routes anyone may call; every other path (unknown ones included) needs a principal."""
CREDENTIAL = "credential"
CLIENT_SUBJECT = "client_subject"
MAX_TOKEN_CHARS = 256
MAX_SUBJECT_CHARS = 1024
AUTH_FAILED = "auth.failed"
"""Audit action of the summaries of failed authentications."""

_KEY = re.compile(r"/v1/keys/([^/]*)(?:/.*)?")
_PRINCIPAL = re.compile(r"/v1/principals/([^/]*)")
_BATCH = re.compile(r"/v1/keys/[^/]+/(?:encrypt|decrypt)/batch")
_STREAM = re.compile(r"/v1/keys/[^/]+/(?:encrypt|decrypt)/stream")

ErrorResponder = Callable[[KeyManagerError, str], Response]


@dataclass(frozen=True)
class BodyLimits:
    """Body limits in bytes: JSON routes, and the two batch routes; the two stream routes have none."""

    json: int
    batch: int

    def of(self, method: str, path: str) -> int | None:
        """The limit of the route ``method path`` (None: unlimited)."""
        if method == "POST" and _STREAM.fullmatch(path):
            return None
        if method == "POST" and _BATCH.fullmatch(path):
            return self.batch
        return self.json


class FrontDoor:
    """ASGI middleware checking names, length and credentials before the body (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        services: Callable[[], Services],
        throttle: AuthThrottle,
        limits: BodyLimits,
        error_app: ErrorResponder,
        methods: Callable[[Scope], list[str]],
    ) -> None:
        self.app = app
        self.methods = methods
        self.services = services
        self.throttle = throttle
        self.limits = limits
        self.error_app = error_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id: str = scope.setdefault("state", {}).get("request_id", "")
        limit = self.limits.of(scope["method"], scope["path"])
        try:
            self._check_names(scope)
            length = _content_length(scope)
            if limit is not None and length is not None and length > limit:
                raise PayloadTooLarge("request body too large")
            if scope["path"] not in PUBLIC_PATHS:
                await self._authenticate(scope)
        except KeyManagerError as exc:
            await self._refuse(exc, request_id, scope, receive, send)
            return
        if limit is None:
            await self.app(scope, receive, send)
            return
        await self._limited(limit, scope, receive, send)

    def _check_names(self, scope: Scope) -> None:
        """The name rules, for a method the path serves (any other method is 405, not a bad name)."""
        try:
            _check_names(scope["path"])
        except InvalidRequest:
            if scope["method"] in self.methods(scope):
                raise

    async def _limited(self, limit: int, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with a body cut at ``limit`` (PayloadTooLarge from ``receive`` past it)."""
        received = 0
        cut = False

        async def limited_receive() -> Message:
            nonlocal received, cut
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    cut = True
                    raise PayloadTooLarge("request body too large")
            return message

        async def closing_send(message: Message) -> None:
            if cut and message["type"] == "http.response.start":  # the rest of the body is never read
                message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        await self.app(scope, limited_receive, closing_send)

    async def _authenticate(self, scope: Scope) -> None:
        """Put the caller's credential in the scope; Unauthenticated, RateLimited or a store error otherwise."""
        client = scope.get("client")
        address = str(client[0]) if client else ""
        credential = credential_of(scope)
        services = self.services()
        wait = self.throttle.retry_after(address)
        if wait is not None and not (credential is not None and services.cache.knows(credential)):
            await self._summarise(self.throttle.refused(address), scope, 429)
            raise RateLimited("too many failed authentications from this address", retry_after=wait)
        try:
            if credential is None:
                raise Unauthenticated()
            await services.cache.snapshot(fresh=False).principal(credential)
        except Unauthenticated:
            await self._summarise(self.throttle.failed(address), scope, 401)
            raise
        scope["state"][CREDENTIAL] = credential

    async def _summarise(self, summary: FailureSummary | None, scope: Scope, status: int) -> None:
        await write_summary(self.services(), summary, scope, status)

    async def _refuse(self, exc: KeyManagerError, request_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        response = self.error_app(exc, request_id)
        if isinstance(exc, RateLimited):
            response.headers["retry-after"] = str(exc.retry_after)
        if _announces_body(scope):
            response.headers["connection"] = "close"
        await response(scope, receive, send)


async def write_summary(services: Services, summary: FailureSummary | None, scope: Scope, status: int) -> None:
    """Record ``summary`` (when one is due) naming this request; the audit log's error if it fails."""
    if summary is not None:
        details = {"method": scope["method"], "path": scope["path"]}
        entry = summary_entry(summary, scope["state"].get("request_id", ""), status, details)
        await services.audit_writer.awrite(entry)


def summary_entry(summary: FailureSummary, request_id: str, status: int, details: dict[str, Any]) -> AuditEntry:
    """The audit entry of a summary of failed authentications (``status``: of the request that made it due)."""
    counts = {"failures": summary.failures, "throttled": summary.throttled}
    if summary.client is None:
        counts["addresses"] = summary.addresses
    return AuditEntry(
        time=datetime.now(UTC),
        action=AUTH_FAILED,
        outcome=Outcome.DENIED,
        status=status,
        request_id=request_id,
        client=summary.client,
        details={**counts, **details},
    )


def credential_of(scope: Scope) -> Credential | None:
    """The credential the request presents: a bearer token, else a verified client certificate; None
    when there is none or it cannot be one (a malformed header, an overlong token)."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_CHARS:
                return None
            return Credential.of_token(token)
    subject = scope.get("extensions", {}).get("tls", {}).get(CLIENT_SUBJECT)
    if subject and len(subject) <= MAX_SUBJECT_CHARS:
        return Credential(subject=subject)
    return None


def _check_names(path: str) -> None:
    if path.startswith("/v1/keys/"):
        match = _KEY.fullmatch(path)
        if match is not None and not is_key_ref(match.group(1)):
            raise InvalidRequest(KEY_REF_RULE)
    elif path.startswith("/v1/principals/"):
        match = _PRINCIPAL.fullmatch(path)
        if match is not None and not is_principal_name(match.group(1)):
            raise InvalidRequest(PRINCIPAL_NAME_RULE)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


def _announces_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False
