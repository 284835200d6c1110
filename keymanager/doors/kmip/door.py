"""The KMIP door: one request message in, one response message out (``docs/kmip.md``).

The listener (``serving/kmip.py``) reads a message within its bounds (its length before anything
of its size is allocated, its deadline) from a TLS connection whose client certificate verified,
and hands it here with the certificate's subject and the client's address. Per message:

1. the caller: the principal bound to the subject (``cert_subject``, through the metadata cache,
   so a principal deleted or rebound stops at once); an unknown subject is answered
   ``Authentication Not Successful``, counted by the throttle every door shares and summarised in
   one ``auth.failed`` record per address and interval, and the connection is closed; a throttled
   address is answered so before any lookup unless its subject is a stored one (``Admission``);
2. the bounds of ``doors/kmip/ttlv.py`` (lengths, nesting, types, tags), then the codec
   (``doors/kmip/codec/``, PyKMIP's decoder behind it) into the door's own requests: a message
   that fails either is answered ``Invalid Message`` and audited (``kmip.message``, with why);
3. each batch item in order: its action ``kmip.<Operation>`` authorized
   (``services/authorization.py``), its operation run (``doors/kmip/``) and its answer rendered
   by the codec, its result — status,
   reason, message — in the response; after a failed item the rest are left undone unless the
   header says ``Continue``. Each item's record is written as the services decide: a success
   committed with its change or key use, every other answer here (``AuditLog.settle``) before the
   response leaves — a record that cannot be written fails the item;
4. the response in the request's protocol version; metrics per operation and result.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from keymanager.api.front_door import Admission, vouched_for
from keymanager.api.metrics import Metrics
from keymanager.api.request_context import next_request_id
from keymanager.domain.audit import AuditEntry, outcome_of
from keymanager.domain.credential_kinds import MAX_SUBJECT_CHARS
from keymanager.domain.credentials import Credential
from keymanager.domain.models import Principal
from keymanager.doors.kmip import Batch, KmipCall, codec, spec, ttlv
from keymanager.doors.kmip.refusals import KmipRefusal, Reason, refusal_of
from keymanager.errors import KeyManagerError
from keymanager.services.authorization import authorize
from keymanager.services.container import Services
from keymanager.services.throttle import AuthThrottle

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    """The response to one message, and whether the connection is to be closed after it."""

    response: bytes
    close: bool = False


class KmipDoor:
    """Serves KMIP request messages (see the module docstring)."""

    def __init__(self, *, services: Callable[[], Services], throttle: AuthThrottle, metrics: Metrics) -> None:
        self.services = services
        self.throttle = throttle
        self.metrics = metrics

    def message_length(self, header: bytes) -> int | None:
        """The length the 8-byte ``header`` of a request message announces, when it is a request
        message's within ``KM_KMIP_MAX_MESSAGE_BYTES``; None otherwise (the listener closes)."""
        try:
            return ttlv.message_length(header, self.services().settings.kmip_max_message_bytes)
        except ttlv.Malformed:
            return None

    async def exchange(self, message: bytes, subject: str | None, client: str) -> Answer:
        """The answer to ``message`` (bounded by the listener) from the holder of the certificate ``subject``."""
        svc = self.services()
        request_id = next_request_id()
        started = time.perf_counter()
        principal = await self._caller(svc, subject, client, request_id)
        if isinstance(principal, KmipRefusal):
            self.metrics.observe_request("kmip", "KMIP", 401, time.perf_counter() - started)
            return Answer(codec.error_response((1, 0), principal), close=True)
        try:
            ttlv.check(message, svc.settings.kmip_max_depth)
            request = codec.decode(message, svc.kmip.served, svc.settings.kmip_max_batch_items)
        except (ttlv.Malformed, KmipRefusal) as exc:
            return await self._unreadable(svc, principal, message, exc, request_id, client, started)
        batch = Batch(request_id, client, request.version)
        results: list[codec.Result] = []
        for item in request.items:
            result = await self._item(svc, principal, batch, item)
            results.append(result)
            if result.refusal is not None and request.stop_on_error:
                break
        try:
            bound = min(
                request.max_response_size or svc.settings.kmip_max_response_bytes, svc.settings.kmip_max_response_bytes
            )
            return Answer(codec.encode(request.version, results, bound))
        except Exception as exc:  # a payload PyKMIP cannot write: a failure of ours, never a stack trace
            log.error("the KMIP response could not be encoded: %s", type(exc).__name__)
            refusal = KmipRefusal(Reason.GENERAL_FAILURE, "the response could not be encoded", 500)
            return Answer(codec.error_response(request.version, refusal))

    async def _caller(
        self, svc: Services, subject: str | None, client: str, request_id: str
    ) -> Principal | KmipRefusal:
        """The principal bound to ``subject``; else the refusal — counted and summarised, like a
        throttled address's presenting a subject no principal is bound to (``Admission``)."""
        credential = Credential(subject=subject) if subject and len(subject) <= MAX_SUBJECT_CHARS else None
        admission = Admission(self.throttle, svc, client, request_id, "KMIP", "kmip")
        why = "too many failed authentications from this address"
        try:
            if await admission.throttled(lambda: vouched_for(svc, credential), 401) is None:
                if credential is not None:
                    with contextlib.suppress(KeyManagerError):
                        return await svc.cache.snapshot(fresh=False).principal(credential)
                why = "the client certificate is bound to no principal"
                self.metrics.observe_auth_failure()
                await admission.failed(401)
        except KeyManagerError:
            log.error("the summary of failed KMIP authentications could not be written")
        return KmipRefusal(Reason.AUTHENTICATION_NOT_SUCCESSFUL, why, 401)

    async def _unreadable(
        self,
        svc: Services,
        principal: Principal,
        message: bytes,
        exc: Exception,
        request_id: str,
        client: str,
        started: float,
    ) -> Answer:
        """The answer to a message that cannot be read: Invalid Message (why, in its result message), audited."""
        refusal = exc if isinstance(exc, KmipRefusal) else KmipRefusal(Reason.INVALID_MESSAGE, str(exc))
        version = codec.answer_version(_requested_version(message))
        entry = AuditEntry(
            time=datetime.now(UTC),
            action="kmip.message",
            outcome=outcome_of(400),
            status=400,
            request_id=request_id,
            principal=principal.name,
            client=client,
            details={"error": refusal.reason.name, "why": refusal.message, "bytes": len(message)},
        )
        self.metrics.observe_request("kmip.message", "KMIP", 400, time.perf_counter() - started)
        settled = await svc.audit_log.settle(
            entry.action, authenticated=True, success_taken=False, status=400, entry=lambda: entry
        )
        if settled.error is not None:
            return Answer(codec.error_response(version, _unrecorded()), close=True)
        return Answer(codec.error_response(version, refusal))

    async def _item(self, svc: Services, principal: Principal, batch: Batch, item: codec.Item) -> codec.Result:
        """The result of one batch item, its record written when its operation did not commit one."""
        started = time.perf_counter()
        name = "unknown" if item.operation is None else _operation_name(item.operation)
        call = KmipCall(principal, name, batch)
        refusal = item.refusal
        payload = None
        if refusal is None:
            try:
                authorize(principal, call.action)
                assert item.operation is not None
                payload = codec.render(item.operation, await svc.kmip.operations[item.operation](call, item.payload))
            except KmipRefusal as exc:
                refusal = exc
            except KeyManagerError as exc:
                refusal = refusal_of(exc)
            except Exception as exc:  # never a stack trace to the client; the class name to the log
                log.error("unhandled %s in KMIP operation %s", type(exc).__name__, name)
                refusal = KmipRefusal(Reason.GENERAL_FAILURE, "internal error", 500)
        if refusal is not None:
            refusal = refusal.in_version(batch.version)
        status = 200 if refusal is None else refusal.status
        code = None if refusal is None else refusal.reason.name
        settled = await svc.audit_log.settle(
            call.action,
            authenticated=True,
            success_taken=call.success_taken,
            status=status,
            entry=lambda: call.entry(status, code),
        )
        if settled.error is not None:
            refusal, status = _unrecorded(), 503
        self.metrics.observe_request(call.action, "KMIP", status, time.perf_counter() - started)
        return codec.Result(item, payload=payload if refusal is None else None, refusal=refusal)


def _operation_name(operation: spec.Operation) -> str:
    """PyKMIP's ``Operation.DISCOVER_VERSIONS`` as the specification spells it: ``DiscoverVersions``."""
    special = {"MAC": "MAC", "MAC_VERIFY": "MACVerify"}
    return special.get(operation.name) or "".join(part.capitalize() for part in operation.name.split("_"))


def _requested_version(message: bytes) -> tuple[int, int] | None:
    """The protocol version a message names, read without trusting it (None: it names none readably)."""
    try:
        header = ttlv.children(message, 0)[0]
        version = ttlv.children(message, header[1])[0]
        major, minor = (ttlv.integer_value(message[s:e]) for _, s, e in ttlv.children(message, version[1])[:2])
    except (IndexError, ValueError, struct.error):  # a message that failed the bounds: any of these
        return None
    return None if major is None or minor is None else (major, minor)


def _unrecorded() -> KmipRefusal:
    return KmipRefusal(Reason.GENERAL_FAILURE, "the audit record could not be written", 503)
