"""Every failure becomes ``{"error": {"code", "message"}, "request_id"}``; never a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from keymanager.api.audit_trail import AuditTrail
from keymanager.errors import ApprovalPending, KeyManagerError, KeyMaterialMissing

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "invalid_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def error_response(
    status: int,
    code: str,
    message: str,
    request_id: str,
    headers: Mapping[str, str] | None = None,
    *,
    retry_after: int | None = None,
) -> JSONResponse:
    """The JSON error body every failure is answered with (and ``Retry-After`` when given)."""
    if retry_after is not None:
        headers = {**(headers or {}), "Retry-After": str(retry_after)}
    return JSONResponse(
        status_code=status,
        content={"error": {"code": code, "message": message}, "request_id": request_id},
        headers=headers,
    )


def render(exc: KeyManagerError, request_id: str) -> JSONResponse:
    """The response for a service error (also used by middleware before routing); a guarded call that
    awaits approval is 202 with the approval request (``docs/usage.md``, "Dual control")."""
    _log_ours(exc)
    if isinstance(exc, ApprovalPending):
        pending = {
            "status": "pending_approval",
            "request_id": exc.request_id,
            "operations": list(exc.operations),
            "approvals_required": exc.approvals_required,
            "expires_at": exc.expires_at,
            "message": exc.message,
        }
        return JSONResponse(status_code=202, content=pending, headers={"Location": f"/v1/approvals/{exc.request_id}"})
    return error_response(exc.status, exc.code, exc.message, request_id, retry_after=exc.retry_after)


def _log_ours(exc: KeyManagerError) -> None:
    """Errors that point at an inconsistency an operator must look at."""
    if isinstance(exc, KeyMaterialMissing):
        log.error("a key object named in the database is missing from the HSM token (request refused)")


def request_id_of(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


def _validation_message(errors: list[Any]) -> str:
    """Where and what, from pydantic's errors; never the input values (they may be secrets)."""
    parts = []
    for error in errors[:5]:
        location = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
        parts.append(f"{location or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _allowed_methods(request: Request) -> str:
    """Every method some route of the app serves at this request's path (``Allow`` of a 405)."""
    return ", ".join(methods_served(request.app.router.routes, request.scope))


def methods_served(routes: Sequence[BaseRoute], scope: Scope) -> list[str]:
    """The methods some route in ``routes`` serves at ``scope``'s path.

    Starlette's own 405 names only the first route whose path matched, while one path may be
    served by several routes (``GET`` and ``PATCH /v1/keys/{key}``): so each method is tried.
    """
    return [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    ]


def install(app: FastAPI) -> None:
    """Register the handlers that turn every exception into the JSON error body."""

    @app.exception_handler(KeyManagerError)
    async def _service_error(request: Request, exc: KeyManagerError) -> JSONResponse:
        trail = request.scope.get("state", {}).get("audit")
        if isinstance(exc, ApprovalPending) and trail is not None:
            trail.not_run(approval_request=exc.request_id)  # the call's own record names what it awaits
        return render(exc, request_id_of(request))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, "invalid_request", _validation_message(list(exc.errors())), request_id_of(request))

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        cause = exc.__cause__
        if isinstance(cause, KeyManagerError):  # e.g. the body limit hit while FastAPI read the body
            return error_response(cause.status, cause.code, cause.message, request_id_of(request))
        code = _HTTP_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else "error"
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = _allowed_methods(request)
        return error_response(exc.status_code, code, message, request_id_of(request), headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette's ServerErrorMiddleware answers with this, then raises exc on to the gateway
        # (api/gateway.py), which adds the request's ids to the answer and records it. A client
        # that hung up gets no answer: the gateway records and logs the hang-up.
        if isinstance(exc, ClientDisconnect):
            raise exc
        trail = request.scope.get("state", {}).get("audit")
        if trail is not None:
            AuditTrail.note_failure(trail, exc)
        return unexpected(exc, request_id_of(request), request.method, request.url.path)


def unexpected(exc: BaseException, request_id: str, method: str, path: str) -> JSONResponse:
    """The answer to an exception that is no KeyManagerError: a plain JSON 500 (never a trace),
    and its class and the request's method and path logged."""
    log.error("unhandled %s on %s %s", type(exc).__name__, method, path)
    return error_response(500, "internal_error", "internal error", request_id)
