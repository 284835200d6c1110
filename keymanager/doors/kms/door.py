"""The AWS KMS API door: ``POST /`` with ``X-Amz-Target: TrentService.<Operation>`` (JSON 1.1).

The gateway (``api/gateway.py``) sends it every ``POST /``; the REST routes never see one. Per
request: the body is read up to 64 KiB (a larger one is refused before parsing), the SigV4
signature is verified with the access key's secret, and only then is the body decoded (strict
JSON, ``domain/strict_json.py``: a stranger's body is never parsed); the operation runs through the same
services as its REST twin, and the answer takes AWS's shape — 200 with the operation's JSON, or
``{"__type": <AWS error>, "message": …}`` — with an ``x-amzn-RequestId`` header. Every call
writes one audit record ``kms.<Operation>`` in the same chain (success or refusal) and is
counted in the request metrics under the route ``kms.<Operation>`` — except a call refused
before its caller authenticated (no, malformed or wrong signature, unknown access key, and
anything refused before the signature could be checked: an unknown operation, a body over the
limit or of another Content-Type), which shares the REST door's per-address throttle: counted, summarised
in one ``auth.failed`` record per address and interval, and once an address's burst is spent
refused with ``ThrottlingException`` (and ``Retry-After``) before its body is read — unless the
access key it claims is a stored one (``services/credential_index.py``): a valid signature is
never refused for a stranger's failures from the same address.
"""

from __future__ import annotations

import asyncio
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
from keymanager.domain import kms, kms_fields, strict_json
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.domain.sigv4 import ReceivedRequest
from keymanager.doors.kms.call import Call
from keymanager.errors import KeyManagerError
from keymanager.services.audit_log import Owed
from keymanager.services.authorization import authorize
from keymanager.services.container import Services
from keymanager.services.snapshot import Snapshot, run_validated
from keymanager.services.throttle import AuthThrottle

log = logging.getLogger(__name__)

TARGET_PREFIX = "TrentService."
_JSON_11 = "application/x-amz-json-1.1"
_HEADERS = [(b"content-type", _JSON_11.encode())]
KNOWN_UNSUPPORTED = frozenset(
    [
        "ConnectCustomKeyStore",
        "CreateCustomKeyStore",
        "CreateGrant",
        "Decapsulate",
        "DeleteCustomKeyStore",
        "DeleteImportedKeyMaterial",
        "DescribeCustomKeyStores",
        "DisconnectCustomKeyStore",
        "Encapsulate",
        "GetKeyLastUsage",
        "GetParametersForImport",
        "ImportKeyMaterial",
        "ListRetirableGrants",
        "ReplicateKey",
        "RetireGrant",
        "RevokeGrant",
        "UpdateCustomKeyStore",
        "UpdatePrimaryRegion",
    ]
)
"""Operations of AWS KMS this service answers ``UnsupportedOperationException``."""


@dataclass
class _Exchange:
    """One KMS call as the door sees it: the operation, its audit context, the call once authenticated."""

    svc: Services
    trail: AuditContext
    operation: str
    call: Call | None = None


class KmsDoor:
    """ASGI app serving the AWS KMS API (see the module docstring); the gateway (``api/gateway.py``)
    sends it every ``POST /``."""

    def __init__(self, *, services: Callable[[], Services], throttle: AuthThrottle) -> None:
        self.services = services
        self.throttle = throttle

    @staticmethod
    def owns(scope: Scope) -> bool:
        """Whether the request ``scope`` is this door's: every ``POST /``."""
        return bool(scope["path"] == "/" and scope["method"] == "POST")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope.setdefault("state", {})
        trail: AuditContext = state.get("audit") or AuditContext(state.get("request_id", ""), None, scope)
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        target = next((v for k, v in headers if k.lower() == "x-amz-target"), "")
        operation = target.removeprefix(TARGET_PREFIX) if target.startswith(TARGET_PREFIX) else ""
        svc = self.services()
        known = operation in _operations(svc) or operation in KNOWN_UNSUPPORTED
        exchange = _Exchange(svc, trail, operation if known else "")
        trail.declared = f"kms.{operation}" if known else "kms.unknown"
        scope["route"] = RouteLabel(trail.declared)
        admission = Admission.of(self.throttle, svc, scope)
        extra: list[tuple[bytes, bytes]] = []
        wait = await admission.throttled(lambda: vouched_for_signature(svc, scope), 400)
        if wait is not None:
            status, answer = 400, {"__type": "ThrottlingException", "message": "too many failed authentications"}
            extra = [(b"retry-after", str(wait).encode()), (b"connection", b"close")]
        else:
            status, refusal, answer = await _answer(exchange, scope, receive, headers)
            status, answer = await self._recorded(exchange, admission, status, refusal, answer)
        body = json.dumps(answer, separators=(",", ":")).encode()
        response_headers = [*_HEADERS, *extra, (b"x-amzn-requestid", trail.request_id.encode())]
        response_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": body})

    async def _recorded(
        self,
        exchange: _Exchange,
        admission: Admission,
        status: int,
        refusal: kms.KmsError | None,
        answer: dict[str, Any],
    ) -> tuple[int, dict[str, Any]]:
        """The answer once the audit log has what the call owes (``AuditLog.settle``): the record of a
        read or a refusal, or — refused before its caller authenticated — its share of its
        address's summary of failed authentications. A record that cannot be written turns the
        answer into a 503 ``DependencyTimeoutException``."""
        settled = await exchange.svc.audit_log.settle(
            exchange.trail.action,
            authenticated=exchange.call is not None,
            success_taken=exchange.trail.success_taken,
            status=status,
            entry=lambda: _entry(exchange, status, refusal),
        )
        if settled.owed is Owed.SUMMARY:
            await admission.failed(status)
        elif settled.error is not None:
            refusal = kms.KmsError("DependencyTimeoutException", "the audit record could not be written", 503)
            return refusal.status, {"__type": refusal.code, "message": refusal.message}
        return status, answer


async def _answer(
    exchange: _Exchange, scope: Scope, receive: Receive, headers: list[tuple[str, str]]
) -> tuple[int, kms.KmsError | None, dict[str, Any]]:
    """The status, the refusal (None for a success) and the JSON of the answer."""
    try:
        if not exchange.operation:
            raise kms.KmsError("UnknownOperationException", "the X-Amz-Target names no operation of TrentService")
        too_large = kms.KmsError("ValidationException", f"the request body is limited to {kms.MAX_BODY_BYTES} bytes")
        body = await read_limited_body(headers, receive, kms.MAX_BODY_BYTES, too_large)
        if not any(k.lower() == "content-type" and v.split(";")[0].strip() == _JSON_11 for k, v in headers):
            raise kms.KmsError("SerializationException", f"Content-Type must be {_JSON_11}")
        request = ReceivedRequest(
            method="POST",
            raw_path=scope.get("raw_path", b"/").decode("latin-1") or "/",
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=body,
        )
        return 200, None, await _serve(exchange, request)
    except KeyManagerError as exc:
        refusal = kms.aws_error(exc)
    except Exception as exc:  # never a stack trace to the client; the class name to the log
        log.error("unhandled %s in KMS operation %s", type(exc).__name__, exchange.trail.action)
        refusal = kms.KmsError("KMSInternalException", "internal error", 500)
    return refusal.status, refusal, {"__type": refusal.code, "message": refusal.message}


async def _entry(exchange: _Exchange, status: int, refusal: kms.KmsError | None) -> AuditEntry:
    """The record of the answer ``status``: a read's, or a refusal's (its AWS code, the key it named)."""
    entry = exchange.trail.entry(status)
    if refusal is None:
        return entry
    if refusal.code in kms.DENIED:
        entry = replace(entry, outcome=Outcome.DENIED)
    return replace(entry, details={**entry.details, "error": refusal.code}, **await _key_of(exchange))


async def _serve(exchange: _Exchange, request: ReceivedRequest) -> dict[str, Any]:
    """Authenticate the caller (its signature, over the body's bytes), only then decode the body,
    authorize the caller for the operation (``services/authorization.py``) and run the operation.
    A success's record is committed with it (keys in use, changes); a read's is the answer's,
    which the door writes as it answers (``KmsDoor._recorded``), as is a refusal's once the
    caller authenticated (a body it signed that is not JSON among them).

    Keys in use go through ``run_validated`` on the metadata snapshot (as the REST hot path);
    reads and changes authenticate on fresh reads and run on a worker thread (as REST's admin
    routes), changes recording their audit entry in the transaction of the change.
    """
    svc, trail, now = exchange.svc, exchange.trail, datetime.now(UTC)

    async def authenticated(snapshot: Snapshot) -> Call:
        principal, credential = await svc.access_keys.authenticate(snapshot, request, now)
        trail.principal = principal.name
        exchange.call = call = Call(principal, credential.region, svc.settings.aws_account_id, {})
        call.params = _params(request.body)
        kms_fields.check_common(call.params)
        return call

    use = svc.kms_crypto.operations.get(exchange.operation)
    if use is not None:

        async def attempt(snapshot: Snapshot) -> dict[str, Any]:
            call = await authenticated(snapshot)
            authorize(call.principal, trail.action)
            return await use(snapshot, call)

        def entry(_: dict[str, Any]) -> AuditEntry:
            assert exchange.call is not None
            trail.key_id, trail.key_version = exchange.call.key_id, exchange.call.key_version
            return trail.success()

        return await run_validated(svc.cache, svc.audit_log, attempt, entry)
    call = await authenticated(svc.cache.snapshot(fresh=True))
    read = svc.kms_keys.reads.get(exchange.operation)
    handler = read or svc.kms_keys.changes.get(exchange.operation)
    if handler is None:
        raise kms.unsupported(exchange.operation)
    authorize(call.principal, trail.action)
    if read is None:  # a change commits its record with itself
        return await asyncio.to_thread(handler, call, trail.success())
    answer = await asyncio.to_thread(read, call, trail.entry(200))  # (a read ignores the record)
    trail.key_id = call.key_id
    return answer


async def _key_of(exchange: _Exchange) -> dict[str, Any]:
    """The key a refused call named, for its audit record (resolved as the REST trail does)."""
    call = exchange.call
    if call is None:
        return {}
    if call.key_id is None and call.key_ref is not None:
        return {"key_id": await asyncio.to_thread(exchange.svc.keys.id_of, call.key_ref)}
    return {"key_id": call.key_id, "key_version": call.key_version}


def _operations(svc: Services) -> set[str]:
    return {*svc.kms_crypto.operations, *svc.kms_keys.reads, *svc.kms_keys.changes}


def _params(body: bytes) -> dict[str, Any]:
    """The JSON object of a signed body (``domain/strict_json.py``): ValidationException when it
    nests too deep (before decoding), SerializationException for anything else it is not."""
    try:
        params = strict_json.loads(body or b"{}")
    except strict_json.TooDeep as exc:
        raise kms.KmsError("ValidationException", str(exc)) from None
    except strict_json.Refused as exc:
        raise kms.KmsError("SerializationException", str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise kms.KmsError("SerializationException", "the body is not valid JSON") from None
    if not isinstance(params, dict):
        raise kms.KmsError("SerializationException", "the body must be a JSON object")
    return params
