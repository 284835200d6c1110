"""On-board streaming of large blobs: ``…/encrypt/stream`` and ``…/decrypt/stream``.

Both take ``application/octet-stream`` and answer it, with the optional encryption context
in the header ``X-KM-Context`` (base64 of a JSON object of strings). Memory stays constant:
the service keeps ciphertext (never plaintext) in a spool file under ``var/spool`` while
the upload completes, then streams the answer.

Nothing is spooled before it is allowed: both check the key's state and the policy before
reading the body; decryption then reads the stream header (key, version) from the first bytes
of the upload and checks it (and the policy again) before it writes a byte. An upload over
``KM_MAX_STREAM_BYTES`` is refused with 413 (at once when ``Content-Length`` says so); one
that does not fit in the free part of the process's spool quota (``KM_MAX_SPOOL_BYTES``)
with 503 ``spool_busy`` and ``Retry-After``. A refused upload's partial spool file is removed.

Decryption releases each segment only after its MAC or tag verified. When a segment fails
(a changed byte, a segment dropped, duplicated or reordered, a truncated or extended
stream), the service aborts the response: the chunked body ends without its last chunk,
which every HTTP client reports as an error (curl exit 18, httpx ``RemoteProtocolError``),
and the failure is recorded in the audit log. A response is whole only if the HTTP message
completed; structural damage found before the first byte is a plain 400 ``decryption_failed``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AuditDep, run_authenticated, services_of
from keymanager.api.json_bodies import StrictJsonRoute, decoded
from keymanager.api.schemas import ERROR_RESPONSES, ErrorBody
from keymanager.domain.models import Principal
from keymanager.domain.stream import StreamHeader, sealed_size_bound
from keymanager.errors import InvalidRequest, KeyManagerError, PayloadTooLarge
from keymanager.services import streams
from keymanager.services.snapshot import Snapshot
from keymanager.services.spool import SpoolFile

router = APIRouter(prefix="/v1/keys", tags=["streams"], responses=ERROR_RESPONSES, route_class=StrictJsonRoute)


class StreamAborted(Exception):
    """A decrypt stream failed after its answer started: the connection is cut without the last chunk."""

    def __init__(self) -> None:
        super().__init__("decryption failed; the response was aborted")


OCTETS = "application/octet-stream"
READ_CHUNK = 256 * 1024
_BODY = {"content": {OCTETS: {"schema": {"type": "string", "format": "binary"}}}, "required": True}
_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"content": {OCTETS: {"schema": {"type": "string", "format": "binary"}}}},
    413: {"model": ErrorBody, "description": "payload_too_large: the upload is over KM_MAX_STREAM_BYTES"},
    503: {
        "model": ErrorBody,
        "description": "hsm_unavailable, database_unavailable, or spool_busy (the spool quota is taken for now)",
        "headers": {"Retry-After": {"description": "seconds, with spool_busy", "schema": {"type": "integer"}}},
    },
}
_STREAMING: dict[str, Any] = {
    "response_class": StreamingResponse,
    "responses": _ANSWER,
    "openapi_extra": {"requestBody": _BODY},
}
ContextHeader = Annotated[str | None, Header()]
"""``X-KM-Context``: base64 of a JSON object of strings (the encryption context)."""


@router.post("/{key}/encrypt/stream", **_STREAMING)
@audited("key.encrypt_stream")
async def encrypt_stream(key: str, request: Request, trail: AuditDep, x_km_context: ContextHeader = None) -> Response:
    """Encrypt the request body in the HSM, segment by segment; the answer is the on-board stream format."""
    svc = services_of(request)
    segment, limit = svc.settings.stream_segment_bytes, svc.settings.max_stream_bytes
    sealed: streams.ReadOnce[tuple[StreamHeader, SpoolFile]] = streams.ReadOnce()
    spools: list[SpoolFile] = []

    async def seal(sealer: streams.StreamSealer) -> tuple[StreamHeader, SpoolFile]:
        bound = sealed_size_bound(_declared_length(request, limit), segment, len(sealer.header.encode()))
        spools.append(spool := svc.spool.open(bound))
        trail.key_id, trail.key_version = sealer.header.key_id, sealer.header.key_version
        trail.details["bytes"] = await streams.seal_body(request.stream(), sealer, spool, limit)
        return sealer.header, spool

    async def use(snapshot: Snapshot, principal: Principal) -> tuple[StreamHeader, SpoolFile]:
        sealer = await svc.crypto.stream_sealer(snapshot, principal, key, segment, _context(x_km_context))
        await snapshot.confirm_current()  # nothing is read or spooled on stale metadata
        return await sealed.get(lambda: seal(sealer))  # the body is read once, by the first attempt

    try:
        _, spool = await run_authenticated(request, trail, use, lambda done: trail.success(done[0]))
    except BaseException:
        _close(spools)
        raise
    spool.seek(0)
    return StreamingResponse(_read_spool(spool), media_type=OCTETS)


@router.post("/{key}/decrypt/stream", **_STREAMING)
@audited("key.decrypt_stream")
async def decrypt_stream(key: str, request: Request, trail: AuditDep, x_km_context: ContextHeader = None) -> Response:
    """Decrypt an on-board stream of this key; each segment is released only once authenticated."""
    svc, body = services_of(request), request.stream()
    limit = svc.settings.max_stream_bytes
    head: streams.ReadOnce[tuple[StreamHeader, int, bytes]] = streams.ReadOnce()
    spooled: streams.ReadOnce[tuple[SpoolFile, list[tuple[int, int]]]] = streams.ReadOnce()
    spools: list[SpoolFile] = []

    async def spool(declared: int, first: bytes, offset: int, segment: int) -> tuple[SpoolFile, list[tuple[int, int]]]:
        spools.append(out := svc.spool.open(declared))
        await _spool_body(first, body, out, limit)
        return out, streams.segments(out, offset, segment)

    async def use(
        snapshot: Snapshot, principal: Principal
    ) -> tuple[streams.StreamOpener, SpoolFile, list[tuple[int, int]]]:
        context = _context(x_km_context)
        usable = await svc.crypto.stream_key(snapshot, principal, key)  # a refused caller sends nothing we read
        await snapshot.confirm_current()  # nothing is read or spooled on stale metadata
        declared = _declared_length(request, limit)
        header, offset, first = await head.get(lambda: streams.read_header(body))
        opener = svc.crypto.stream_opener(usable, header, context)
        trail.key_id, trail.key_version = header.key_id, header.key_version
        return (opener, *await spooled.get(lambda: spool(declared, first, offset, header.segment_size)))

    try:
        opener, out, found = await run_authenticated(request, trail, use, lambda done: trail.success(done[0].header))
    except BaseException:
        _close(spools)
        raise
    return StreamingResponse(_answer(streams.open_segments(out, found, opener)), media_type=OCTETS)


def _close(spools: list[SpoolFile]) -> None:
    """Give back the spool files of a refused request (the ones the first attempt filled included)."""
    for spool in spools:
        spool.close()


def _context(header: str | None) -> dict[str, str] | None:
    if header is None:
        return None
    try:
        value = decoded(base64.b64decode(header, validate=True))
    except (binascii.Error, ValueError):
        raise InvalidRequest("X-KM-Context must be base64 of a JSON object of strings") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidRequest("X-KM-Context must be base64 of a JSON object of strings")
    return value


def _declared_length(request: Request, limit: int) -> int:
    """The body's ``Content-Length`` (0 when not given); PayloadTooLarge when it is over ``limit``."""
    value = request.headers.get("content-length", "")
    length = int(value) if value.isdigit() else 0
    if length > limit:
        raise PayloadTooLarge(f"a stream is limited to {limit} bytes")
    return length


async def _spool_body(first: bytes, body: AsyncIterator[bytes], spool: SpoolFile, limit: int) -> None:
    """Write ``first`` and the rest of ``body`` to ``spool``; PayloadTooLarge past ``limit`` bytes."""
    size = 0

    def add(chunk: bytes) -> None:
        nonlocal size
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"a stream is limited to {limit} bytes")
        spool.write(chunk)

    add(first)
    async for chunk in body:
        add(chunk)


async def _read_spool(spool: SpoolFile) -> AsyncIterator[bytes]:
    try:
        while chunk := spool.read(READ_CHUNK):
            yield chunk
    finally:
        spool.close()


async def _answer(plaintext: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The response body: ``plaintext`` as it comes; on a failure the response is cut (see the module docstring)."""
    try:
        async for chunk in plaintext:
            yield chunk
    except KeyManagerError as exc:
        raise StreamAborted() from exc  # recorded with the status of exc (see api/audit_trail.py)
