"""The AWS External Key Store door: ``POST /<prefix>/kms/xks/v1/keys/<externalKeyId>/{metadata,encrypt,decrypt}``
and ``POST /<prefix>/kms/xks/v1/health`` (the XKS proxy API, ``docs/xks.md``).

The gateway (``api/gateway.py``) sends it every request whose path holds ``/kms/xks/``. Per
request: a path of another shape is ``InvalidUriPathException`` (404), a method other than POST
405; the body is read up to 64 KiB; the SigV4 signature (service ``kms-xks-proxy``, five minutes
of clock skew) is verified with the secret of one of a key store's access keys, and the path's
prefix must be that key store's (else ``InvalidUriPathException``: its credential is valid, its
path names another store); then the operation runs through ``doors/xks/`` and the answer
is the operation's JSON, or ``{"errorName", "errorMessage"}`` with the spec's status.

Every key operation of an authenticated key store writes one audit record ``xks.<Operation>``
(success or refusal, with the request's ``requestMetadata``, bounded, and the external key id) in
the chain. A request refused before its key store authenticated shares the per-address throttle
of the other doors: counted, summarised in one ``auth.failed`` record per address and interval,
and once an address's burst is spent refused with ``ThrottlingException`` before its body is read.
The health check writes no record (it touches no key of a key store).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from starlette.types import Receive, Scope, Send

from keymanager.api.audit_trail import AuditContext
from keymanager.api.front_door import Admission, read_limited_body, vouched_for_signature
from keymanager.api.request_context import RouteLabel
from keymanager.domain import strict_json, xks
from keymanager.domain.audit import AuditEntry
from keymanager.domain.kms import KmsError
from keymanager.domain.models import Door
from keymanager.domain.sigv4 import ReceivedRequest
from keymanager.doors.xks import XksCall
from keymanager.errors import KeyManagerError
from keymanager.services.authorization import authorize
from keymanager.services.container import Services
from keymanager.services.snapshot import Snapshot, run_validated
from keymanager.services.throttle import AuthThrottle

log = logging.getLogger(__name__)

MARK = "/kms/xks/"
"""What the path of every request of this door holds (and no REST path does)."""
_HEADERS = [(b"content-type", b"application/json")]


@dataclass
class _Exchange:
    """One XKS request as the door sees it: its path, its audit context, the call once authenticated."""

    svc: Services
    trail: AuditContext
    path: xks.XksPath | None
    call: XksCall | None = None


class XksDoor:
    """ASGI app serving the XKS proxy API (see the module docstring)."""

    def __init__(self, *, services: Callable[[], Services], throttle: AuthThrottle) -> None:
        self.services = services
        self.throttle = throttle

    @staticmethod
    def owns(scope: Scope) -> bool:
        """Whether the request ``scope`` is this door's: every path holding :data:`MARK`."""
        return MARK in scope["path"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope.setdefault("state", {})
        trail: AuditContext = state.get("audit") or AuditContext(state.get("request_id", ""), None, scope)
        svc = self.services()
        try:
            path: xks.XksPath | None = xks.parse_path(scope["path"])
        except xks.XksError:
            path = None
        exchange = _Exchange(svc, trail, path)
        trail.declared = f"xks.{path.operation}" if path else "xks.unknown"
        scope["route"] = RouteLabel(trail.declared)
        admission = Admission.of(self.throttle, svc, scope)
        extra: list[tuple[bytes, bytes]] = []
        wait = await admission.throttled(lambda: vouched_for_signature(svc, scope), 429)
        if wait is not None:
            status, answer = 429, _error(xks.XksError("ThrottlingException", "too many failed authentications"))
            extra = [(b"retry-after", str(wait).encode()), (b"connection", b"close")]
        else:
            status, answer = await _answer(exchange, scope, receive)
            if status != 200 and exchange.call is None:  # refused before the key store authenticated
                await admission.failed(status)
            if status == 405:
                extra = [(b"allow", b"POST")]
        body = json.dumps(answer, separators=(",", ":")).encode()
        headers = [*_HEADERS, *extra, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _answer(exchange: _Exchange, scope: Scope, receive: Receive) -> tuple[int, dict[str, Any]]:
    """The status and JSON of the answer. A success's audit record is written with it, a refusal's here."""
    try:
        if exchange.path is None:
            raise xks.XksError("InvalidUriPathException", "the URI path is not one of the XKS proxy API")
        if scope["method"] != "POST":
            raise xks.XksError("MethodNotAllowed", "the XKS proxy API takes POST only")
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        too_large = xks.invalid(f"the request body is limited to {xks.MAX_BODY_BYTES} bytes")
        body = await read_limited_body(headers, receive, xks.MAX_BODY_BYTES, too_large)
        request = ReceivedRequest(
            method="POST",
            raw_path=scope.get("raw_path", b"").decode("latin-1") or scope["path"],
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=body,
        )
        return 200, await _serve(exchange, request, body)
    except KmsError as exc:  # the signature's refusal (the only KmsError here)
        refusal = xks.XksError("AuthenticationFailedException", exc.message)
    except KeyManagerError as exc:
        refusal = xks.xks_error(exc)
    except Exception as exc:  # never a stack trace to the client; the class name to the log
        log.error("unhandled %s in XKS operation %s", type(exc).__name__, exchange.trail.action)
        refusal = xks.XksError("InternalException", "internal error")
    call = exchange.call  # None: refused before the key store authenticated (a summary's share, counted by the caller)

    def entry() -> AuditEntry:
        assert call is not None  # a record is owed only once the key store authenticated
        return _record(exchange.trail, call, refusal.status, refusal.name)

    settled = await exchange.svc.audit_log.settle(
        exchange.trail.action, authenticated=call is not None, success_taken=False, status=refusal.status, entry=entry
    )
    if settled.error is not None:
        refusal = xks.XksError("DependencyTimeoutException", "the audit record could not be written")
    return refusal.status, _error(refusal)


async def _serve(exchange: _Exchange, request: ReceivedRequest, body: bytes) -> dict[str, Any]:
    """Authenticate the key store and run the operation; a key operation's record is written on success."""
    svc, trail, path = exchange.svc, exchange.trail, exchange.path
    assert path is not None
    now = datetime.now(UTC)

    async def authenticated(snapshot: Snapshot) -> XksCall:
        principal, _ = await svc.access_keys.authenticate(snapshot, request, now, door=Door.XKS)
        trail.principal = principal.name
        authorize(principal, trail.action)
        exchange.call = call = XksCall(principal, path, {})
        if principal.xks_uri_prefix != path.prefix:
            raise xks.XksError("InvalidUriPathException", "the URI path is not this key store's")
        call.params = _params(body, lenient=path.operation == "GetHealthStatus")
        call.metadata = xks.request_metadata(call.params, path.operation)
        return call

    use = svc.xks.operations.get(path.operation)
    if use is None:  # the health check
        await authenticated(svc.cache.snapshot(fresh=True))
        return await svc.xks_health.status()

    async def attempt(snapshot: Snapshot) -> dict[str, Any]:
        return await use(snapshot, await authenticated(snapshot))

    def entry(_: dict[str, Any]) -> AuditEntry:
        assert exchange.call is not None
        return _record(trail, exchange.call, 200, None)

    return await run_validated(svc.cache, svc.audit_log, attempt, entry)


def _record(trail: AuditContext, call: XksCall, status: int, error: str | None) -> AuditEntry:
    """The audit entry of a key store's request: the key it named, its ``requestMetadata`` and external key id."""
    trail.key_id, trail.key_version = call.key_id, call.key_version
    details: dict[str, Any] = {"error": error} if error else {}
    details.update(call.metadata)
    if call.path.key_id is not None:
        details["externalKeyId"] = call.path.key_id
    return replace(trail.entry(status), details={**trail.details, **details})


def _error(refusal: xks.XksError) -> dict[str, Any]:
    return {"errorName": refusal.name, "errorMessage": refusal.message}


def _params(body: bytes, *, lenient: bool) -> dict[str, Any]:
    """The JSON object of the body, read by the strict decoder (``domain/strict_json.py``): JSON no
    door takes (a key named twice, ``NaN``, nesting too deep) is ValidationException on every
    path; a body that is not a JSON object is too, or (``lenient``) an empty one."""
    try:
        params = strict_json.loads(body)
    except strict_json.Refused as exc:
        raise xks.invalid(str(exc)) from None
    except ValueError:
        params = None
    if isinstance(params, dict):
        return params
    if lenient:
        return {}
    raise xks.invalid("the body must be a JSON object")
