"""The Vault Transit door: ``/v1/<mount>/…`` (``KM_TRANSIT_MOUNT``, default ``transit``), and Vault's
``POST /v1/auth/approle/login`` and ``/v1/auth/token/lookup-self`` (``docs/transit.md``).

The gateway (``api/gateway.py``) sends it every request under a mount or ``/v1/auth/`` (no REST path
is either: ``config.py`` refuses a mount that would shadow one). Per request: the path names the
operation (404 ``unsupported path``, 405 for another method); the caller presents ``X-Vault-Token`` (or
``Authorization: Bearer``): a principal's bearer token or an AppRole client token, authenticated through
the metadata cache like every credential; the action ``transit.<operation>`` is authorized with the
rights table; only then is the body read (bounded: ``KM_MAX_REQUEST_BYTES``, the batch limit for the
operations that take ``batch_input``) and decoded as strict JSON (a key named twice, nesting deeper than
``codec.MAX_DEPTH``: 400); then the operation runs through ``doors/transit/``. Answers are Vault's:
``{"data": …}`` in Vault's envelope, or ``{"errors": ["…"]}`` with its status (400, 403 ``permission
denied``, 404, 405, 413, 429, 500, 503).

Audit: a use of key material or a read commits its success record before it answers (``run_validated``),
a change commits it with the change; every refusal of an authenticated caller writes its record (the
answer waits for it: 503 when it cannot be written); a request refused before its caller authenticated
(a bad or missing token, a failed login, a path of no operation) shares the per-address throttle and the
summarised ``auth.failed`` records of every door, and once its address's burst is spent it is refused
with 429 before its body is read (unless its credential is a stored one: ``vouched_for``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from starlette.types import Receive, Scope, Send

from keymanager.api.audit_trail import AuditContext
from keymanager.api.front_door import Admission, read_limited_body, vouched_for
from keymanager.api.request_context import RouteLabel
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credential_kinds import MAX_TOKEN_CHARS
from keymanager.domain.credentials import Credential
from keymanager.domain.models import Principal
from keymanager.doors.transit import TransitCall, codec, message_of
from keymanager.doors.transit.codec import PERMISSION_DENIED, Route, TransitError
from keymanager.doors.transit.identity import login_answer, lookup_answer
from keymanager.errors import (
    DecryptionFailed,
    Forbidden,
    KeyManagerError,
    KeyNotFound,
    NotFound,
    RateLimited,
    Unauthenticated,
    VersionBelowMinimum,
)
from keymanager.services.authorization import authorize
from keymanager.services.container import Services
from keymanager.services.snapshot import Snapshot, run_validated
from keymanager.services.throttle import AuthThrottle

log = logging.getLogger(__name__)

_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
_BATCHED = frozenset({"encrypt", "decrypt", "rewrap", "hmac", "sign", "verify"})
_MANAGED = frozenset({"key_read", "key_config", "key_rotate", "key_delete", "key_trim", "export"})
"""Operations on a named key whose missing key is Vault's 404 (the others answer 400, as Vault's do)."""
MAX_LOGIN_BYTES = 4096


@dataclass(frozen=True)
class BodyLimits:
    """Body limits of the door, in bytes: every operation, and those that take ``batch_input``."""

    json: int
    batch: int


@dataclass
class _Exchange:
    """One Transit request as the door sees it."""

    svc: Services
    trail: AuditContext
    scope: Scope
    route: Route | None
    refused: TransitError | None
    credential: Credential | None
    body: bytes | None = None
    principal: Principal | None = None
    call: TransitCall | None = None
    success_taken: bool = False
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


class TransitDoor:
    """ASGI app serving the Vault Transit API (see the module docstring)."""

    def __init__(
        self,
        *,
        services: Callable[[], Services],
        throttle: AuthThrottle,
        mounts: list[str],
        limits: BodyLimits,
    ) -> None:
        self.services = services
        self.throttle = throttle
        self.mounts = sorted(mounts, key=len, reverse=True)
        self.limits = limits

    def owns(self, scope: Scope) -> bool:
        """Whether the request ``scope`` is this door's: a path under a mount or ``/v1/auth/``."""
        return codec.owns(scope["path"], self.mounts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope.setdefault("state", {})
        trail: AuditContext = state.get("audit") or AuditContext(state.get("request_id", ""), None, scope)
        headers = dict(reversed(scope["headers"]))  # ASGI names are lower case; the first of each name wins
        exchange = self._exchange(scope, trail, headers)
        admission = Admission.of(self.throttle, exchange.svc, scope)
        wait = await admission.throttled(lambda: self._vouched(exchange, receive, headers), 429)
        if wait is not None:
            status, answer = 429, _errors("too many failed authentications from this address")
            exchange.headers = [(b"retry-after", str(wait).encode()), (b"connection", b"close")]
        else:
            status, answer = await _answer(exchange, receive, headers, self.limits)
            if status >= 400 and exchange.principal is None:  # refused before its caller authenticated
                await admission.failed(status)
        body = b"" if answer is None else json.dumps(answer, separators=(",", ":")).encode()
        response = [*_HEADERS, *exchange.headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": response})
        await send({"type": "http.response.body", "body": body})

    def _exchange(self, scope: Scope, trail: AuditContext, headers: Mapping[bytes, bytes]) -> _Exchange:
        route: Route | None = None
        refused: TransitError | None = None
        try:
            route = codec.parse_path(scope["path"], self.mounts)
            if route is not None and route.operation == "key":
                route = replace(route, operation=codec.keyed_operation(_method(scope)))
        except TransitError as exc:
            refused = exc
        trail.declared = f"transit.{route.operation}" if route else "transit.unknown"
        scope["route"] = RouteLabel(trail.declared)
        if route is not None and route.mount is not None:
            trail.details["mount"] = route.mount
        return _Exchange(self.services(), trail, scope, route, refused, _credential(headers))

    async def _vouched(self, exchange: _Exchange, receive: Receive, headers: Mapping[bytes, bytes]) -> bool:
        """Whether a throttled address is served for this request's credential: a stored token, or the
        stored ``secret_id`` of a login (its body read, within :data:`MAX_LOGIN_BYTES`)."""
        if exchange.route is not None and exchange.route.operation == "login":
            try:
                exchange.body = await _read(headers, receive, MAX_LOGIN_BYTES)
                secret = codec.text(codec.body(exchange.body), "secret_id", limit=256)
            except TransitError:
                return False
            return bool(secret) and await vouched_for(exchange.svc, Credential.of_token(secret))
        return await vouched_for(exchange.svc, exchange.credential)


async def _answer(
    exchange: _Exchange, receive: Receive, headers: Mapping[bytes, bytes], limits: BodyLimits
) -> tuple[int, Any]:
    """The status and JSON of the answer; a refusal's audit record is written here."""
    try:
        return await _serve(exchange, receive, headers, limits)
    except TransitError as exc:
        status, message = exc.status, exc.message
    except KeyManagerError as exc:
        status, message = _vault_error(exc, exchange.route)
        if isinstance(exc, RateLimited):
            exchange.headers.append((b"retry-after", str(exc.retry_after or 1).encode()))
    except Exception as exc:  # never a stack trace to the client; the class name to the log
        log.error("unhandled %s in Transit operation %s", type(exc).__name__, exchange.trail.action)
        status, message = 500, "internal error"
    if status == 405 and exchange.route is not None:
        exchange.headers.append((b"allow", ", ".join(codec.methods_of(exchange.route.operation)).encode()))
    settled = await exchange.svc.audit_log.settle(
        exchange.trail.action,
        authenticated=exchange.principal is not None,
        success_taken=False,
        status=status,
        entry=lambda: _record(exchange, status, message),
    )
    if settled.error is not None:
        status, message = 503, "the audit record could not be written"
    return status, _errors(message) if message else {"errors": []}


async def _serve(
    exchange: _Exchange, receive: Receive, headers: Mapping[bytes, bytes], limits: BodyLimits
) -> tuple[int, Any]:
    route, svc = exchange.route, exchange.svc
    if route is not None and route.operation == "login":
        _allowed(exchange.scope, route)
        return await _login(exchange, receive, headers)
    if exchange.credential is None:
        raise Unauthenticated()
    principal = await _authenticated(exchange, svc.cache.snapshot(fresh=False))
    if route is None:
        assert exchange.refused is not None
        raise exchange.refused
    _allowed(exchange.scope, route)
    authorize(principal, exchange.trail.action)
    limit = limits.batch if route.operation in _BATCHED else limits.json
    params = codec.body(await _read(headers, receive, limit))
    if route.operation in svc.transit.changes:
        return await _change(exchange, route, params)
    if route.operation == "lookup_self":
        return await _use(exchange, route, params, lambda snapshot, call: _lookup_self(exchange, call))
    return await _use(exchange, route, params, svc.transit.uses[route.operation])


async def _authenticated(exchange: _Exchange, snapshot: Snapshot) -> Principal:
    """The principal of the request's credential on ``snapshot`` (Unauthenticated otherwise)."""
    assert exchange.credential is not None
    principal = await snapshot.principal(exchange.credential)
    exchange.principal = principal
    exchange.trail.principal = principal.name
    return principal


async def _use(exchange: _Exchange, route: Route, params: dict[str, Any], use: Any) -> tuple[int, Any]:
    """A read or a use of key material on the request's snapshot; its record committed with it."""
    svc, trail = exchange.svc, exchange.trail

    async def attempt(snapshot: Snapshot) -> dict[str, Any]:
        principal = authorize(await _authenticated(exchange, snapshot), trail.action)
        exchange.call = call = TransitCall(principal, route, params)
        data: dict[str, Any] = await use(snapshot, call)
        return data

    def entry(_: dict[str, Any]) -> AuditEntry:
        assert exchange.call is not None
        return _record(exchange, exchange.call.status, None)

    data = await run_validated(svc.cache, svc.audit_log, attempt, entry)
    exchange.success_taken = True
    assert exchange.call is not None
    return exchange.call.status, _envelope(exchange, data)


async def _change(exchange: _Exchange, route: Route, params: dict[str, Any]) -> tuple[int, Any]:
    """A key change, its caller authenticated on fresh reads; the change commits its record."""
    principal = authorize(
        await _authenticated(exchange, exchange.svc.cache.snapshot(fresh=True)), exchange.trail.action
    )
    exchange.call = call = TransitCall(principal, route, params)
    status = 204 if route.operation == "key_delete" else 200
    change = exchange.svc.transit.changes[route.operation]
    data = await asyncio.to_thread(change, call, _record(exchange, status, None))
    exchange.success_taken = True
    if not call.recorded:  # nothing changed (a create of a key that exists): the answer's own record
        settled = await exchange.svc.audit_log.settle(
            exchange.trail.action,
            authenticated=True,
            success_taken=False,
            status=status,
            entry=lambda: _record(exchange, status, None),
        )
        if settled.error is not None:
            raise settled.error
    return (204, None) if data is None else (200, _envelope(exchange, data))


async def _login(exchange: _Exchange, receive: Receive, headers: Mapping[bytes, bytes]) -> tuple[int, Any]:
    """AppRole's login: a client token for the principal whose ``role_id`` and ``secret_id`` these are."""
    raw = exchange.body if exchange.body is not None else await _read(headers, receive, MAX_LOGIN_BYTES)
    params = codec.body(raw)
    codec.only(params, {"role_id", "secret_id"})
    role_id, secret_id = codec.text(params, "role_id", limit=64), codec.text(params, "secret_id", limit=256)
    approles = exchange.svc.transit.approles
    try:
        logged_in = await asyncio.to_thread(approles.login, role_id, secret_id, record=exchange.trail.entry(200))
    except Unauthenticated:
        raise TransitError(400, "invalid role or secret ID") from None
    exchange.principal = logged_in.principal
    exchange.trail.principal = logged_in.principal.name
    exchange.success_taken = True
    answer = _envelope(exchange, None)
    answer["auth"] = login_answer(logged_in, approles.ttl_seconds)
    return 200, answer


async def _lookup_self(exchange: _Exchange, call: TransitCall) -> dict[str, Any]:
    """``token/lookup-self``: who the token is, and when it expires (an AppRole client token)."""
    assert exchange.credential is not None and exchange.credential.token_hash is not None
    found = await asyncio.to_thread(exchange.svc.transit.approles.client_token, exchange.credential.token_hash)
    return lookup_answer(call.principal, found, datetime.now(UTC))


def _record(exchange: _Exchange, status: int, error: str | None) -> AuditEntry:
    """The audit entry of the request: the key it named, its mount, a refusal's message."""
    trail, call = exchange.trail, exchange.call
    details: dict[str, Any] = {"error": error} if error else {}
    if call is not None:
        trail.key_id, trail.key_version = call.key_id, call.key_version
        details.update(call.details)
    if exchange.route is not None and exchange.route.name is not None and trail.key_id is None:
        details["key"] = exchange.route.name[:128]
    return replace(trail.entry(status), details={**trail.details, **details})


def _envelope(exchange: _Exchange, data: dict[str, Any] | None) -> dict[str, Any]:
    """Vault's answer around ``data``."""
    warnings = exchange.call.warnings if exchange.call is not None and exchange.call.warnings else None
    return {
        "request_id": exchange.trail.request_id,
        "lease_id": "",
        "renewable": False,
        "lease_duration": 0,
        "data": data,
        "wrap_info": None,
        "warnings": warnings,
        "auth": None,
    }


def _errors(message: str) -> dict[str, Any]:
    return {"errors": [message]}


def _vault_error(exc: KeyManagerError, route: Route | None) -> tuple[int, str]:
    """Vault's status and words for a refusal of the services."""
    if isinstance(exc, Unauthenticated | Forbidden):
        return 403, PERMISSION_DENIED
    if isinstance(exc, KeyNotFound):
        if route is not None and route.operation in _MANAGED:
            return 404, ""
        return 400, codec.NOT_FOUND_KEY
    if isinstance(exc, NotFound):
        return 404, ""
    if isinstance(exc, DecryptionFailed | VersionBelowMinimum):
        return 400, message_of(exc)
    if exc.status == 413:
        return 400, exc.message  # a field over the service's limit (the body's own limit is the door's 413)
    if exc.status in (429, 503):
        return exc.status, exc.message
    if exc.status >= 500:
        return 500, exc.message
    return 400, exc.message


def _method(scope: Scope) -> str:
    """The request's method as Vault reads it: ``LIST`` also as ``GET …?list=true``."""
    method = str(scope["method"]).upper()
    if method == "GET" and b"list=true" in scope.get("query_string", b"").lower().split(b"&"):
        return "LIST"
    return method


def _allowed(scope: Scope, route: Route) -> None:
    if _method(scope) not in codec.methods_of(route.operation):
        raise TransitError(405, "unsupported operation")


async def _read(headers: Mapping[bytes, bytes], receive: Receive, limit: int) -> bytes:
    """The body, at most ``limit`` bytes (413 before a byte beyond it is kept)."""
    length = headers.get(b"content-length")
    listed = [] if length is None else [("content-length", length.decode("latin-1"))]
    too_large = TransitError(413, f"http: request body too large (at most {limit} bytes)")
    return await read_limited_body(listed, receive, limit, too_large)


def _credential(headers: Mapping[bytes, bytes]) -> Credential | None:
    """The token the request presents: ``X-Vault-Token``, else ``Authorization: Bearer`` (None: none, or
    one that cannot be a token)."""
    token = headers.get(b"x-vault-token", b"").decode("latin-1").strip()
    if not token:
        scheme, _, rest = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" else ""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    return Credential.of_token(token)
