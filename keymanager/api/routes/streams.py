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

import asyncio
import base64
import binascii
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AuditDep, Caller, ServicesDep
from keymanager.api.schemas import ERROR_RESPONSES, ErrorBody
from keymanager.domain.stream import (
    StreamHeader,
    header_size,
    read_header,
    sealed_length,
    sealed_size_bound,
    segment_prefix,
)
from keymanager.errors import DecryptionFailed, InvalidRequest, KeyManagerError, PayloadTooLarge
from keymanager.services.spool import SpoolFile
from keymanager.services.streams import StreamOpener, StreamSealer

router = APIRouter(prefix="/v1/keys", tags=["streams"], responses=ERROR_RESPONSES)


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


@router.post(
    "/{key}/encrypt/stream", response_class=StreamingResponse, responses=_ANSWER, openapi_extra={"requestBody": _BODY}
)
@audited("key.encrypt_stream")
async def encrypt_stream(
    key: str,
    request: Request,
    principal: Caller,
    svc: ServicesDep,
    trail: AuditDep,
    x_km_context: str | None = Header(default=None),
) -> StreamingResponse:
    """Encrypt the request body in the HSM, segment by segment; the answer is the on-board stream format."""
    context = _context(x_km_context)
    segment = svc.settings.stream_segment_bytes
    sealer = await run_in_threadpool(svc.crypto.stream_sealer, principal, key, segment, context)
    trail.key_id, trail.key_version = sealer.header.key_id, sealer.header.key_version
    limit = svc.settings.max_stream_bytes
    head = sealer.header.encode()
    spool = svc.spool.open(sealed_size_bound(_declared_length(request, limit), segment, len(head)))
    try:
        spool.write(head)
        size = await _seal_body(request.stream(), sealer, segment, spool, limit)
    except BaseException:
        spool.close()
        raise
    trail.details["bytes"] = size
    spool.seek(0)
    return StreamingResponse(_read_spool(spool), media_type=OCTETS)


@router.post(
    "/{key}/decrypt/stream", response_class=StreamingResponse, responses=_ANSWER, openapi_extra={"requestBody": _BODY}
)
@audited("key.decrypt_stream")
async def decrypt_stream(
    key: str,
    request: Request,
    principal: Caller,
    svc: ServicesDep,
    trail: AuditDep,
    x_km_context: str | None = Header(default=None),
) -> StreamingResponse:
    """Decrypt an on-board stream of this key; each segment is released only once authenticated."""
    context = _context(x_km_context)
    await run_in_threadpool(svc.crypto.stream_key, principal, key)  # a refused caller sends nothing we read
    limit = svc.settings.max_stream_bytes
    declared = _declared_length(request, limit)
    body = request.stream()
    header, offset, first = await _read_header(body)
    opener = await run_in_threadpool(svc.crypto.stream_opener, principal, key, header, context)
    trail.key_id, trail.key_version = header.key_id, header.key_version
    spool = svc.spool.open(declared)
    try:
        await _spool_body(first, body, spool, limit)
        segments = _segments(spool, offset, header.segment_size)
    except BaseException:
        spool.close()
        raise
    return StreamingResponse(_open_segments(spool, segments, opener), media_type=OCTETS)


def _context(header: str | None) -> dict[str, str] | None:
    if header is None:
        return None
    try:
        value = json.loads(base64.b64decode(header, validate=True))
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


async def _read_header(body: AsyncIterator[bytes]) -> tuple[StreamHeader, int, bytes]:
    """The stream header from the first bytes of ``body``: the header, its length, the bytes read.

    Reads no further than the chunk that completes the header; DecryptionFailed when the body
    ends first or the header is malformed.
    """
    first = bytearray()
    async for chunk in body:
        first += chunk
        size = header_size(first)
        if size is not None and len(first) >= size:
            break
    header, offset = read_header(bytes(first))
    return header, offset, bytes(first)


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


async def _seal_body(body: AsyncIterator[bytes], sealer: StreamSealer, segment: int, out: SpoolFile, limit: int) -> int:
    """Seal the body into ``out``; one segment is held back until it is known whether it is the last.

    While the HSM seals one segment, the next is being received. PayloadTooLarge past ``limit`` bytes.
    """
    buffer = bytearray()
    held: bytes | None = None
    pending: asyncio.Future[bytes] | None = None
    seq = size = 0

    async def flush(data: bytes, final: bool) -> None:
        nonlocal pending, seq
        if pending is not None:
            _write_segment(out, await pending)
        pending = asyncio.ensure_future(sealer.seal(seq, data, final=final))
        seq += 1

    async for chunk in body:
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"a stream is limited to {limit} bytes")
        buffer += chunk
        while len(buffer) > segment or (held is None and len(buffer) == segment):
            if held is not None:
                await flush(held, final=False)
            held = bytes(buffer[:segment])
            del buffer[:segment]
    if held is not None and buffer:
        await flush(held, final=False)
        held = None
    await flush(held if held is not None else bytes(buffer), final=True)
    assert pending is not None
    _write_segment(out, await pending)
    return size


def _write_segment(out: SpoolFile, sealed: bytes) -> None:
    out.write(segment_prefix(len(sealed)))
    out.write(sealed)


async def _read_spool(spool: SpoolFile) -> AsyncIterator[bytes]:
    try:
        while chunk := spool.read(READ_CHUNK):
            yield chunk
    finally:
        spool.close()


def _segments(spool: SpoolFile, offset: int, segment_size: int) -> list[tuple[int, int]]:
    """(offset, length) of every sealed segment; DecryptionFailed when the framing does not add up."""
    end = spool.seek(0, 2)
    found = []
    while offset < end:
        spool.seek(offset)
        length = sealed_length(spool.read(4), segment_size)
        if offset + 4 + length > end:
            raise DecryptionFailed()
        found.append((offset + 4, length))
        offset += 4 + length
    if not found:
        raise DecryptionFailed()
    return found


async def _open_segments(
    spool: SpoolFile, segments: list[tuple[int, int]], opener: StreamOpener
) -> AsyncIterator[bytes]:
    """Plaintext segment by segment, the next one opening while the current one is sent."""

    def start(index: int) -> asyncio.Future[bytes]:
        offset, length = segments[index]
        spool.seek(offset)
        sealed = spool.read(length)
        return asyncio.ensure_future(opener.open(index, sealed, final=index == len(segments) - 1))

    try:
        upcoming = start(0)
        for index in range(len(segments)):
            current = upcoming
            try:
                plaintext = await current
            except KeyManagerError as exc:
                raise StreamAborted() from exc  # recorded with the status of exc (see api/audit_trail.py)
            if index + 1 < len(segments):
                upcoming = start(index + 1)
            yield plaintext
    finally:
        spool.close()
