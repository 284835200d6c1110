"""The KMEV envelope format: round trips, known-answer vectors, every tamper case, bounded memory."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from keymanager_sdk import DecryptionFailed, EnvelopeError, KeyManagerError, decrypt_envelope, encrypt_envelope
from keymanager_sdk._envelope import MIN_SEGMENT_SIZE, TAG_BYTES, read_header, seal_stream, write_atomically
from keymanager_sdk._models import Context

from tests.sdk import envelope_reference

VECTORS = sorted((Path(__file__).parent / "vectors").glob("*.json"))
S = MIN_SEGMENT_SIZE
SEGMENT = S + TAG_BYTES


class FixedKeys:
    """A data-key provider with one known key; ``contexts`` records the contexts it was asked for."""

    def __init__(self) -> None:
        self.key = bytes(range(32))
        self.contexts: list[Context | None] = []

    def generate_data_key(self, context: Context | None) -> tuple[bytes, str]:
        self.contexts.append(context)
        return self.key, "km:1:test:1:wrapped"

    def decrypt_data_key(self, wrapped_key: str, context: Context | None) -> bytes:
        self.contexts.append(context)
        if wrapped_key != "km:1:test:1:wrapped":
            raise DecryptionFailed.local()  # as the service answers
        return self.key


def seal(plaintext: bytes, context: Context | None = None, segment_size: int = S) -> bytes:
    out = io.BytesIO()
    encrypt_envelope(FixedKeys(), io.BytesIO(plaintext), out, context, segment_size)
    return out.getvalue()


def open_(envelope: bytes, context: Context | None = None) -> bytes:
    out = io.BytesIO()
    decrypt_envelope(FixedKeys(), io.BytesIO(envelope), out, context)
    return out.getvalue()


def header_length(envelope: bytes) -> int:
    stream = io.BytesIO(envelope)
    read_header(stream)
    return stream.tell()


@pytest.mark.parametrize("size", [0, 1, S - 1, S, S + 1, 3 * S, 3 * S + 5])
def test_round_trip(size: int) -> None:
    plaintext = os.urandom(size)
    envelope = seal(plaintext, {"doc": "x"})
    segments = max(1, -(-size // S))
    assert len(envelope) == header_length(envelope) + size + segments * TAG_BYTES
    assert open_(envelope) == plaintext
    assert open_(envelope, {"doc": "x"}) == plaintext


def test_fresh_nonce_prefix_per_envelope() -> None:
    assert seal(b"same") != seal(b"same")


def test_context_is_authenticated_and_must_match_when_given() -> None:
    provider = FixedKeys()
    sealed = io.BytesIO()
    encrypt_envelope(provider, io.BytesIO(b"data"), sealed, {"tenant": "42"})
    decrypt_envelope(provider, io.BytesIO(sealed.getvalue()), io.BytesIO())
    assert provider.contexts == [{"tenant": "42"}, {"tenant": "42"}]
    for wrong in ({"tenant": "43"}, {}):
        with pytest.raises(DecryptionFailed):
            open_(sealed.getvalue(), wrong)
    with pytest.raises(DecryptionFailed):
        open_(seal(b"data"), {})


@pytest.mark.parametrize("segment_size", [S - 1, 1024 * 1024 + 1])
def test_segment_size_limits(segment_size: int) -> None:
    with pytest.raises(ValueError, match="segment size"):
        seal(b"x", segment_size=segment_size)


def test_not_an_envelope() -> None:
    for data in (b"", b"PK\x03\x04 zip", b"KMEV\x02\x01" + bytes(20), b"KMEV\x01\x02" + bytes(20)):
        with pytest.raises(EnvelopeError):
            open_(data)


def _flip(at: Callable[[bytes], int]) -> Callable[[bytes], bytes]:
    def tamper(envelope: bytes) -> bytes:
        changed = bytearray(envelope)
        changed[at(envelope)] ^= 0x01
        return bytes(changed)

    return tamper


def _segments(envelope: bytes) -> tuple[bytes, list[bytes]]:
    start = header_length(envelope)
    body = envelope[start:]
    return envelope[:start], [body[i : i + SEGMENT] for i in range(0, len(body), SEGMENT)]


def _rebuild(change: Callable[[list[bytes]], list[bytes]]) -> Callable[[bytes], bytes]:
    def tamper(envelope: bytes) -> bytes:
        header, segments = _segments(envelope)
        return header + b"".join(change(segments))

    return tamper


TAMPERS: dict[str, Callable[[bytes], bytes]] = {
    "segment size byte": _flip(lambda e: 9),
    "nonce prefix byte": _flip(lambda e: 12),
    "wrapped key byte": _flip(lambda e: 25),
    "context byte": _flip(lambda e: header_length(e) - 3),
    "first segment ciphertext byte": _flip(lambda e: header_length(e) + 10),
    "middle segment byte": _flip(lambda e: header_length(e) + SEGMENT + 100),
    "last tag byte": _flip(lambda e: len(e) - 1),
    "first segment tag byte": _flip(lambda e: header_length(e) + SEGMENT - 1),
    "segment dropped": _rebuild(lambda s: [s[0], s[2], s[3]]),
    "last segment dropped": _rebuild(lambda s: s[:-1]),
    "segments reordered": _rebuild(lambda s: [s[1], s[0], s[2], s[3]]),
    "segment duplicated": _rebuild(lambda s: [s[0], s[0], s[1], s[2], s[3]]),
    "last segment duplicated": _rebuild(lambda s: [*s, s[-1]]),
    "truncated inside the last segment": lambda e: e[:-1],
    "truncated inside a tag": lambda e: e[: header_length(e) + 3 * SEGMENT + 7],
    "truncated after the header": lambda e: e[: header_length(e)],
    "truncated inside the header": lambda e: e[: header_length(e) - 2],
    "one byte appended": lambda e: e + b"\x00",
    "a tag's worth appended": lambda e: e + bytes(TAG_BYTES),
    "a whole segment appended": lambda e: e + e[-SEGMENT:],
    "wrapped key length changed": lambda e: e[:17] + (int.from_bytes(e[17:19], "big") - 1).to_bytes(2, "big") + e[19:],
}


@pytest.mark.parametrize("name", list(TAMPERS))
def test_every_tamper_is_refused(name: str) -> None:
    plaintext = os.urandom(3 * S + 1000)  # segments: full, full, full, short final
    envelope = seal(plaintext, {"doc": "1"})
    tampered = TAMPERS[name](envelope)
    assert tampered != envelope
    with pytest.raises(KeyManagerError):
        open_(tampered)
    with pytest.raises(envelope_reference.Refused):
        envelope_reference.decrypt(tampered, FixedKeys().key)


def test_truncation_at_a_segment_boundary_of_an_exact_multiple() -> None:
    envelope = seal(os.urandom(2 * S))
    with pytest.raises(DecryptionFailed):
        open_(envelope[:-SEGMENT])


def test_header_from_another_envelope_is_refused() -> None:
    first, second = seal(b"a" * 100), seal(b"b" * 100)
    header, _ = _segments(first)
    _, segments = _segments(second)
    with pytest.raises(DecryptionFailed):
        open_(header + b"".join(segments))


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vectors(path: Path) -> None:
    vector: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    data_key, plaintext, envelope = (bytes.fromhex(vector[k]) for k in ("data_key", "plaintext", "envelope"))
    header = vector["header"]
    out = io.BytesIO()
    seal_stream(
        io.BytesIO(plaintext), out, data_key=data_key, wrapped_key=header["wrapped_key"], context=header["context"],
        segment_size=header["segment_size"], nonce_prefix=bytes.fromhex(header["nonce_prefix"]),
    )  # fmt: skip
    assert out.getvalue() == envelope
    assert envelope_reference.decrypt(envelope, data_key) == plaintext
    fields, _ = envelope_reference.parse_header(envelope)
    assert fields["context"] == header["context"] and fields["wrapped_key"] == header["wrapped_key"]


def test_vectors_cover_the_edges() -> None:
    sizes = {len(json.loads(p.read_text(encoding="utf-8"))["plaintext"]) // 2 for p in VECTORS}
    assert {0, 1, 2 * S, 2 * S + 17} <= sizes


class PatternReader:
    """A readable stream of ``size`` pseudo-random bytes, produced segment by segment."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.block = os.urandom(1 << 20)
        self.digest = hashlib.sha256()

    def readinto(self, buf: memoryview) -> int:
        count = min(len(buf), self.left, len(self.block))
        buf[:count] = self.block[:count]
        self.digest.update(buf[:count])
        self.left -= count
        return count


class DigestWriter:
    """A writable stream that keeps only the SHA-256 and the length of what it is given."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        self.digest.update(data)
        self.size += len(data)
        return len(data)


def test_70_mb_round_trip_in_constant_memory(tmp_path: Path) -> None:
    size = 70 * 1000 * 1000
    sealed = tmp_path / "sealed.kmev"
    source = PatternReader(size)
    tracemalloc.start()
    try:
        write_atomically(sealed, lambda dst: encrypt_envelope(FixedKeys(), source, dst))  # type: ignore[arg-type]
        _, sealing_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        sink = DigestWriter()
        with sealed.open("rb") as src:
            decrypt_envelope(FixedKeys(), src, sink)  # type: ignore[arg-type]
        _, opening_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.size == size and sink.digest.digest() == source.digest.digest()
    assert sealing_peak < 4 * 1024 * 1024 and opening_peak < 4 * 1024 * 1024, (sealing_peak, opening_peak)


def test_failed_file_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out"

    def fail(dst: Any) -> None:
        dst.write(b"partial")
        raise DecryptionFailed.local()

    with pytest.raises(DecryptionFailed):
        write_atomically(target, fail)
    assert list(tmp_path.iterdir()) == []
