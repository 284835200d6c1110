"""On-board streaming: large blobs encrypted and decrypted by the HSM, segment by segment.

The format is :mod:`keymanager.domain.stream` (``docs/onboard-stream-format.md``). A
:class:`StreamSealer` seals segments under the key's primary version; a :class:`StreamOpener`
opens the segments of one stream, each only after its MAC or tag is verified. Both run the HSM
work on the process's HSM thread, one segment per call, so small requests keep being served
between segments. The framing lives here too: :func:`seal_body` turns plaintext chunks into a
stream, :func:`read_header`, :func:`segments` and :func:`open_segments` take one apart; callers
only move bytes (from the request, to and from a spool file, to the response).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from keymanager.domain import ciphertext as ct
from keymanager.domain import stream
from keymanager.domain.models import HsmObjects, Key
from keymanager.domain.stream import StreamHeader, segment_prefix
from keymanager.errors import DecryptionFailed, KeyManagerError, PayloadTooLarge, VersionBelowMinimum
from keymanager.hsm import Hsm
from keymanager.services.spool import SpoolFile

T = TypeVar("T")


@dataclass(frozen=True)
class StreamSealer:
    hsm: Hsm
    objects: HsmObjects
    header: StreamHeader
    context: bytes

    @classmethod
    def for_key(cls, hsm: Hsm, key: Key, segment_size: int, context: Mapping[str, str] | None) -> StreamSealer:
        """A sealer for a new stream under ``key``'s primary version (the key's use already checked)."""
        version = key.versions[key.primary_version]
        header = StreamHeader(key.algorithm, segment_size, secrets.token_bytes(16), key.id, version.version)
        return cls(hsm, version.hsm, header, ct.canonical_context(context))

    async def seal(self, seq: int, plaintext: bytes, *, final: bool) -> bytes:
        """The sealed segment ``seq`` (at most ``segment_size`` bytes of plaintext)."""
        head = self.header.segment_head(seq, final)
        return await self.hsm.aencrypt(self.objects, self.header.algorithm, head, plaintext, self.context)


@dataclass(frozen=True)
class StreamOpener:
    hsm: Hsm
    objects: HsmObjects
    header: StreamHeader
    context: bytes

    @classmethod
    def for_key(cls, hsm: Hsm, key: Key, header: StreamHeader, context: Mapping[str, str] | None) -> StreamOpener:
        """An opener of a stream made with ``key`` (the key's use already checked).

        DecryptionFailed when the stream names another key, an unknown version or another
        algorithm; VersionBelowMinimum below the key's ``min_decryption_version``.
        """
        version = key.version(header.key_version)
        if header.key_id != key.id or header.algorithm is not key.algorithm or version is None:
            raise DecryptionFailed()
        if header.key_version < key.min_decryption_version:
            raise VersionBelowMinimum()
        return cls(hsm, version.hsm, header, ct.canonical_context(context))

    async def open(self, seq: int, sealed: bytes, *, final: bool) -> bytes:
        """The plaintext of segment ``seq``; DecryptionFailed unless it is authentic, in place and final as told."""
        head = self.header.segment_head(seq, final)
        return await self.hsm.adecrypt(self.objects, self.header.algorithm, head, sealed, self.context)


class ReadOnce(Generic[T]):
    """The outcome of work that consumes a request's body, which only its first attempt can read:
    later attempts (after a stale cache, see ``run_validated``) get the same result or error."""

    def __init__(self) -> None:
        self._outcome: tuple[T] | KeyManagerError | None = None

    async def get(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()`` the first time; its result (or KeyManagerError) again every later time."""
        if self._outcome is None:
            try:
                self._outcome = (await work(),)
            except KeyManagerError as exc:
                self._outcome = exc
        if isinstance(self._outcome, KeyManagerError):
            raise self._outcome
        return self._outcome[0]


async def seal_body(body: AsyncIterator[bytes], sealer: StreamSealer, out: SpoolFile, limit: int) -> int:
    """Write the stream of ``body`` (header, then sealed segments) to ``out``; the plaintext size.

    One segment is held back until it is known whether it is the last. While the HSM seals one
    segment, the next is being received. PayloadTooLarge past ``limit`` bytes.
    """
    segment = sealer.header.segment_size
    out.write(sealer.header.encode())
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


async def read_header(body: AsyncIterator[bytes]) -> tuple[StreamHeader, int, bytes]:
    """The stream header from the first bytes of ``body``: the header, its length, the bytes read.

    Reads no further than the chunk that completes the header; DecryptionFailed when the body
    ends first or the header is malformed.
    """
    first = bytearray()
    async for chunk in body:
        first += chunk
        size = stream.header_size(first)
        if size is not None and len(first) >= size:
            break
    header, offset = stream.read_header(bytes(first))
    return header, offset, bytes(first)


def segments(spool: SpoolFile, offset: int, segment_size: int) -> list[tuple[int, int]]:
    """(offset, length) of every sealed segment; DecryptionFailed when the framing does not add up."""
    end = spool.seek(0, 2)
    found = []
    while offset < end:
        spool.seek(offset)
        length = stream.sealed_length(spool.read(4), segment_size)
        if offset + 4 + length > end:
            raise DecryptionFailed()
        found.append((offset + 4, length))
        offset += 4 + length
    if not found:
        raise DecryptionFailed()
    return found


async def open_segments(spool: SpoolFile, found: list[tuple[int, int]], opener: StreamOpener) -> AsyncIterator[bytes]:
    """Plaintext segment by segment, the next one opening while the current one is sent; the first
    segment that fails raises its error (DecryptionFailed). Closes ``spool`` when done."""

    def start(index: int) -> asyncio.Future[bytes]:
        offset, length = found[index]
        spool.seek(offset)
        sealed = spool.read(length)
        return asyncio.ensure_future(opener.open(index, sealed, final=index == len(found) - 1))

    try:
        upcoming = start(0)
        for index in range(len(found)):
            plaintext = await upcoming
            if index + 1 < len(found):
                upcoming = start(index + 1)
            yield plaintext
    finally:
        spool.close()
