"""Envelope encryption of large blobs: the KMEV format (see ``docs/envelope-format.md``).

A blob is encrypted locally with a fresh 256-bit data key under AES-256-GCM, in framed segments;
the data key travels in the header wrapped by the key manager. This module knows the format and
runs the segment loops over binary file objects; it never talks to the service. Data keys come
from a ``DataKeyProvider`` (the clients pass one backed by the service; tests pass fixed keys).

Failures: input that is not a KMEV envelope of a known version and algorithm raises
``EnvelopeError``; every other problem of an envelope (header lengths, context, truncation,
reordering, duplication, appended bytes, any changed byte) raises ``DecryptionFailed``.
Plaintext of a segment is written only once its tag is verified, but the output of a
decryption that raises must be discarded: earlier segments were already written.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from keymanager_sdk._exceptions import DecryptionFailed, EnvelopeError
from keymanager_sdk._models import Context, context_json

T = TypeVar("T")

MAGIC = b"KMEV"
FORMAT_VERSION = 1
ALGORITHM_AES_256_GCM = 1
MIN_SEGMENT_SIZE = 64 * 1024
MAX_SEGMENT_SIZE = 1024 * 1024
DEFAULT_SEGMENT_SIZE = 256 * 1024
DATA_KEY_BYTES = 32
NONCE_PREFIX_BYTES = 7
TAG_BYTES = 16
MAX_SEGMENTS = 2**32

_FIXED = struct.Struct(">4sBBI7sH")  # magic, version, algorithm, segment size, nonce prefix, wrapped key length
_CONTEXT_LENGTH = struct.Struct(">H")


class DataKeyProvider(Protocol):
    """Where an envelope's data key comes from and how it is unwrapped again."""

    def generate_data_key(self, context: Context | None) -> tuple[bytes, str]:
        """A fresh 32-byte data key and its wrapped form (an ASCII string), bound to ``context``."""
        ...

    def decrypt_data_key(self, wrapped_key: str, context: Context | None) -> bytes:
        """The data key of ``wrapped_key``; raises ``DecryptionFailed`` when it cannot be unwrapped."""
        ...


@dataclass(frozen=True)
class EnvelopeHeader:
    """The authenticated header of an envelope (``context`` None: the envelope has no context)."""

    segment_size: int
    nonce_prefix: bytes
    wrapped_key: str
    context: Mapping[str, str] | None

    def encode(self) -> bytes:
        """The header's bytes; raises ``ValueError`` for values the format cannot hold."""
        if not MIN_SEGMENT_SIZE <= self.segment_size <= MAX_SEGMENT_SIZE:
            raise ValueError(f"segment size must be between {MIN_SEGMENT_SIZE} and {MAX_SEGMENT_SIZE} bytes")
        if len(self.nonce_prefix) != NONCE_PREFIX_BYTES:
            raise ValueError("nonce prefix must be 7 bytes")
        wrapped = self.wrapped_key.encode("ascii")
        context = encode_context(self.context)
        if not 0 < len(wrapped) <= 0xFFFF or len(context) > 0xFFFF:
            raise ValueError("wrapped key or context too long for the header")
        fixed = _FIXED.pack(
            MAGIC, FORMAT_VERSION, ALGORITHM_AES_256_GCM, self.segment_size, self.nonce_prefix, len(wrapped)
        )
        return fixed + wrapped + _CONTEXT_LENGTH.pack(len(context)) + context


def encode_context(context: Context | None) -> bytes:
    """Canonical JSON of a context: UTF-8, keys sorted, no whitespace; empty for no context.

    A context that is not a mapping of ``str`` to ``str`` is a ``TypeError`` (``context_json``'s rule).
    """
    canonical = context_json(context)
    if canonical is None:
        return b""
    return json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _decode_context(raw: bytes) -> dict[str, str] | None:
    if not raw:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise DecryptionFailed.local() from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise DecryptionFailed.local()
    if encode_context(value) != raw:
        raise DecryptionFailed.local()
    return value


def nonce(prefix: bytes, seq: int, final: bool) -> bytes:
    """The 12-byte nonce of segment ``seq``: prefix (7) ‖ seq (4, big-endian) ‖ 0x01 if final else 0x00."""
    return prefix + seq.to_bytes(4, "big") + (b"\x01" if final else b"\x00")


def read_full(src: BinaryIO, buf: memoryview) -> int:
    """Fill ``buf`` from ``src`` until it is full or the stream ends; the number of bytes read."""
    readinto = getattr(src, "readinto", None)
    got = 0
    while got < len(buf):
        if readinto is not None:
            count = readinto(buf[got:]) or 0
        else:
            chunk = src.read(len(buf) - got)
            count = len(chunk)
            buf[got : got + count] = chunk
        if count == 0:
            break
        got += count
    return got


def _read_exact(src: BinaryIO, size: int) -> bytes:
    buf = bytearray(size)
    if read_full(src, memoryview(buf)) != size:
        raise DecryptionFailed.local()
    return bytes(buf)


def read_header(src: BinaryIO) -> tuple[EnvelopeHeader, bytes]:
    """Read and check an envelope header; the header and its exact bytes (the AAD of every segment)."""
    fixed = bytearray(_FIXED.size)
    got = read_full(src, memoryview(fixed))
    if got < 6 or fixed[:4] != MAGIC:
        raise EnvelopeError("not a keymanager envelope (bad magic)")
    if fixed[4] != FORMAT_VERSION or fixed[5] != ALGORITHM_AES_256_GCM:
        raise EnvelopeError(f"unsupported envelope version {fixed[4]} or algorithm {fixed[5]}")
    if got != _FIXED.size:
        raise DecryptionFailed.local()
    _, _, _, segment_size, prefix, wrapped_length = _FIXED.unpack(bytes(fixed))
    if not MIN_SEGMENT_SIZE <= segment_size <= MAX_SEGMENT_SIZE or wrapped_length == 0:
        raise DecryptionFailed.local()
    wrapped = _read_exact(src, wrapped_length)
    context_length = _read_exact(src, _CONTEXT_LENGTH.size)
    context = _read_exact(src, _CONTEXT_LENGTH.unpack(context_length)[0])
    try:
        wrapped_key = wrapped.decode("ascii")
    except UnicodeDecodeError:
        raise DecryptionFailed.local() from None
    header = EnvelopeHeader(segment_size, prefix, wrapped_key, _decode_context(context))
    return header, bytes(fixed) + wrapped + context_length + context


def check_context(header: EnvelopeHeader, expected: Context | None) -> None:
    """When the caller names a context, it must be the envelope's (``DecryptionFailed`` otherwise)."""
    if expected is not None and encode_context(expected) != encode_context(header.context):
        raise DecryptionFailed.local()


def seal_stream(
    src: BinaryIO,
    dst: BinaryIO,
    *,
    data_key: bytes,
    wrapped_key: str,
    context: Context | None = None,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    nonce_prefix: bytes | None = None,
) -> EnvelopeHeader:
    """Write the envelope of everything read from ``src`` to ``dst``, with a data key already at hand.

    ``nonce_prefix`` is random unless given (only known-answer tests give it). Memory use is two
    segments, whatever the size of the input.
    """
    if len(data_key) != DATA_KEY_BYTES:
        raise ValueError("the data key must be 32 bytes")
    prefix = secrets.token_bytes(NONCE_PREFIX_BYTES) if nonce_prefix is None else nonce_prefix
    header = EnvelopeHeader(segment_size, prefix, wrapped_key, context)
    aad = header.encode()
    dst.write(aad)
    aead = AESGCM(data_key)
    current, following = memoryview(bytearray(segment_size)), memoryview(bytearray(segment_size))
    out = memoryview(bytearray(segment_size + TAG_BYTES))
    size = read_full(src, current)
    for seq in range(MAX_SEGMENTS):
        next_size = read_full(src, following) if size == segment_size else 0
        final = next_size == 0
        dst.write(_seal(aead, nonce(prefix, seq, final), current[:size], aad, out[: size + TAG_BYTES]))
        if final:
            return header
        current, following, size = following, current, next_size
    raise ValueError("input too long for one envelope")


def _seal(aead: AESGCM, nonce: bytes, data: memoryview, aad: bytes, out: memoryview) -> memoryview | bytes:
    """``data`` sealed (ciphertext ‖ tag), in ``out`` where cryptography can write in place (≥ 45)."""
    if hasattr(aead, "encrypt_into"):
        aead.encrypt_into(nonce, data, aad, out)
        return out
    return aead.encrypt(nonce, data, aad)


def _open(aead: AESGCM, nonce: bytes, data: memoryview, aad: bytes, out: memoryview) -> memoryview | bytes:
    """``data`` (ciphertext ‖ tag) opened, in ``out`` where possible; ``DecryptionFailed`` on a bad tag."""
    try:
        if hasattr(aead, "decrypt_into"):
            aead.decrypt_into(nonce, data, aad, out)
            return out
        return aead.decrypt(nonce, data, aad)
    except InvalidTag:
        raise DecryptionFailed.local() from None


def open_stream(src: BinaryIO, dst: BinaryIO, header: EnvelopeHeader, aad: bytes, data_key: bytes) -> None:
    """Decrypt the segments that follow a header read by ``read_header``, writing plaintext to ``dst``.

    Raises ``DecryptionFailed`` at the first segment that does not authenticate, on truncation
    and on bytes after the final segment.
    """
    if len(data_key) != DATA_KEY_BYTES:
        raise DecryptionFailed.local()
    aead = AESGCM(data_key)
    full = header.segment_size + TAG_BYTES
    current, following = memoryview(bytearray(full)), memoryview(bytearray(full))
    out = memoryview(bytearray(header.segment_size))
    size = read_full(src, current)
    for seq in range(MAX_SEGMENTS):
        next_size = read_full(src, following) if size == full else 0
        final = next_size == 0
        if size < TAG_BYTES or (final and seq > 0 and size == TAG_BYTES):
            raise DecryptionFailed.local()
        dst.write(_open(aead, nonce(header.nonce_prefix, seq, final), current[:size], aad, out[: size - TAG_BYTES]))
        if final:
            return
        current, following, size = following, current, next_size
    raise DecryptionFailed.local()


def encrypt_envelope(
    provider: DataKeyProvider,
    src: BinaryIO,
    dst: BinaryIO,
    context: Context | None = None,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
) -> EnvelopeHeader:
    """Encrypt ``src`` into an envelope on ``dst`` with a fresh data key from ``provider``."""
    data_key, wrapped = provider.generate_data_key(context)
    return seal_stream(src, dst, data_key=data_key, wrapped_key=wrapped, context=context, segment_size=segment_size)


def decrypt_envelope(
    provider: DataKeyProvider, src: BinaryIO, dst: BinaryIO, context: Context | None = None
) -> EnvelopeHeader:
    """Decrypt the envelope read from ``src`` to ``dst``; ``context``, when given, must be the envelope's."""
    header, aad = read_header(src)
    check_context(header, context)
    open_stream(src, dst, header, aad, provider.decrypt_data_key(header.wrapped_key, header.context))
    return header


def write_atomically(out_path: str | os.PathLike[str], write: Callable[[BinaryIO], T]) -> T:
    """Run ``write`` on a temporary file beside ``out_path`` and move it into place only on success."""
    target = Path(out_path)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            result = write(out)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return result
