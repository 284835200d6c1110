"""On-board streaming of large blobs: ``…/encrypt/stream`` and ``…/decrypt/stream``.

Both take ``application/octet-stream`` and answer it, with the optional encryption context
in the header ``X-KM-Context`` (base64 of a JSON object of strings). Memory stays constant:
the service keeps ciphertext (never plaintext) in a spool file under ``var/spool`` while
the upload completes, then streams the answer.

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
import tempfile
from collections.abc import AsyncIterator
from typing import IO, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from keymanager.api.audit_trail import AuditContext, audited
from keymanager.api.deps import AuditDep, CurrentPrincipal, ServicesDep
from keymanager.api.schemas import ERROR_RESPONSES
from keymanager.domain.stream import read_header, sealed_length, segment_prefix
from keymanager.errors import DecryptionFailed, InvalidRequest, KeyManagerError
from keymanager.services.container import Services
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
    200: {"content": {OCTETS: {"schema": {"type": "string", "format": "binary"}}}}
}


@router.post(
    "/{key}/encrypt/stream", response_class=StreamingResponse, responses=_ANSWER, openapi_extra={"requestBody": _BODY}
)
@audited("key.encrypt_stream")
async def encrypt_stream(
    key: str,
    request: Request,
    principal: CurrentPrincipal,
    svc: ServicesDep,
    trail: AuditDep,
    x_km_context: str | None = Header(default=None),
) -> StreamingResponse:
    """Encrypt the request body in the HSM, segment by segment; the answer is the on-board stream format."""
    trail.details["key"] = key
    context = _context(x_km_context)
    segment = svc.settings.stream_segment_bytes
    sealer = await run_in_threadpool(svc.crypto.stream_sealer, principal, key, segment, context)
    trail.key_id, trail.key_version = sealer.header.key_id, sealer.header.key_version
    spool = _spool(svc)
    try:
        spool.write(sealer.header.encode())
        size = await _seal_body(request.stream(), sealer, segment, spool)
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
    principal: CurrentPrincipal,
    svc: ServicesDep,
    trail: AuditDep,
    x_km_context: str | None = Header(default=None),
) -> StreamingResponse:
    """Decrypt an on-board stream of this key; each segment is released only once authenticated."""
    trail.details["key"] = key
    context = _context(x_km_context)
    spool = _spool(svc)
    try:
        async for chunk in request.stream():
            spool.write(chunk)
        spool.seek(0)
        header, offset = read_header(spool.read(4096))
        opener = await run_in_threadpool(svc.crypto.stream_opener, principal, key, header, context)
        segments = _segments(spool, offset, header.segment_size)
    except BaseException:
        spool.close()
        raise
    trail.key_id, trail.key_version = header.key_id, header.key_version
    return StreamingResponse(_open_segments(spool, segments, opener, trail), media_type=OCTETS)


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


def _spool(svc: Services) -> IO[bytes]:
    svc.settings.spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return tempfile.TemporaryFile(dir=svc.settings.spool_dir)


async def _seal_body(body: AsyncIterator[bytes], sealer: StreamSealer, segment: int, out: IO[bytes]) -> int:
    """Seal the body into ``out``; one segment is held back until it is known whether it is the last.

    While the HSM seals one segment, the next is being received.
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


def _write_segment(out: IO[bytes], sealed: bytes) -> None:
    out.write(segment_prefix(len(sealed)))
    out.write(sealed)


async def _read_spool(spool: IO[bytes]) -> AsyncIterator[bytes]:
    try:
        while chunk := spool.read(READ_CHUNK):
            yield chunk
    finally:
        spool.close()


def _segments(spool: IO[bytes], offset: int, segment_size: int) -> list[tuple[int, int]]:
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
    spool: IO[bytes], segments: list[tuple[int, int]], opener: StreamOpener, trail: AuditContext
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
                trail.details["aborted"] = exc.code
                raise StreamAborted() from None
            if index + 1 < len(segments):
                upcoming = start(index + 1)
            yield plaintext
    finally:
        spool.close()
