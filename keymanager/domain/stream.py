"""The on-board stream format: a large blob encrypted by the HSM in authenticated segments.

Layout (all integers big-endian)::

    stream  := header segment+
    header  := "KMS" | u8 format (1) | u8 algorithm (1 = AES_256_CBC_HMAC_SHA256, 2 = AES_256_GCM,
               3 = AES_128_GCM, 4 = AES_192_GCM)
               | u32 segment_size | 16 bytes stream id (random) | u16 n | n bytes ciphertext header
               (ASCII "km:1:<key_id>:<key_version>:")
    segment := u32 m | m bytes sealed

``sealed`` is the body of a small-field ciphertext of that key version (IV ‖ ciphertext ‖ MAC,
or nonce ‖ ciphertext ‖ tag) made with the authenticated header ``header ‖ u64 seq ‖ u8 final``
(``seq`` counts segments from 0, ``final`` is 1 on the last segment only) and the encryption
context. So every segment is authenticated on its own, in place (its sequence number) and as
last or not: a changed byte, a dropped, duplicated or reordered segment, a truncated stream
and appended data all fail authentication. Every segment but the last holds exactly
``segment_size`` plaintext bytes; the last holds 0 to ``segment_size``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from keymanager.domain.ciphertext import header as ciphertext_header
from keymanager.domain.key_specs import FORMAT_IDS
from keymanager.domain.models import Algorithm
from keymanager.errors import DecryptionFailed

MAGIC = b"KMS"
FORMAT = 1
ALGORITHM_IDS = FORMAT_IDS
"""The algorithm id each encrypting spec has in this format (the table of key types' ``format_id``)."""
MAX_SEGMENT = 4 * 1024 * 1024
SEGMENT_OVERHEAD = 64
"""More than the largest sealing overhead (CBC: IV 16 + padding ≤ 16 + MAC 32)."""
_FIXED = struct.Struct(">3sBBI16sH")


@dataclass(frozen=True)
class StreamHeader:
    algorithm: Algorithm
    segment_size: int
    stream_id: bytes
    key_id: str
    key_version: int

    def encode(self) -> bytes:
        head = ciphertext_header(self.key_id, self.key_version)
        fixed = _FIXED.pack(MAGIC, FORMAT, ALGORITHM_IDS[self.algorithm], self.segment_size, self.stream_id, len(head))
        return fixed + head

    def segment_head(self, seq: int, final: bool) -> bytes:
        """The authenticated header of segment ``seq``."""
        return self.encode() + struct.pack(">QB", seq, int(final))


def read_header(data: bytes) -> tuple[StreamHeader, int]:
    """Parse a stream header at the start of ``data``; the header and its length.

    Anything malformed raises DecryptionFailed (no reason given).
    """
    if len(data) < _FIXED.size:
        raise DecryptionFailed()
    magic, version, algorithm_id, segment_size, stream_id, n = _FIXED.unpack_from(data)
    end = _FIXED.size + n
    if magic != MAGIC or version != FORMAT or not 0 < segment_size <= MAX_SEGMENT or len(data) < end:
        raise DecryptionFailed()
    algorithm = next((a for a, i in ALGORITHM_IDS.items() if i == algorithm_id), None)
    parts = data[_FIXED.size : end].split(b":")
    if algorithm is None or len(parts) != 5 or parts[:2] != [b"km", b"1"] or parts[4] != b"":
        raise DecryptionFailed()
    try:
        key_id, version = parts[2].decode("ascii"), int(parts[3])
    except (UnicodeDecodeError, ValueError):
        raise DecryptionFailed() from None
    header = StreamHeader(algorithm, segment_size, stream_id, key_id, version)
    if header.encode() != data[:end]:
        raise DecryptionFailed()
    return header, end


def header_size(prefix: bytes | bytearray) -> int | None:
    """The length of the header that ``prefix`` starts, or None while too few bytes are known."""
    if len(prefix) < _FIXED.size:
        return None
    return _FIXED.size + int.from_bytes(prefix[_FIXED.size - 2 : _FIXED.size], "big")


def sealed_size_bound(plaintext_bytes: int, segment_size: int, header_bytes: int) -> int:
    """At most how many bytes the stream of ``plaintext_bytes`` takes (header, prefixes, overheads)."""
    segments = max(1, -(-plaintext_bytes // segment_size))
    return header_bytes + plaintext_bytes + segments * (4 + SEGMENT_OVERHEAD)


def segment_prefix(sealed_length: int) -> bytes:
    return struct.pack(">I", sealed_length)


def sealed_length(prefix: bytes, segment_size: int) -> int:
    """The length announced by a segment prefix; DecryptionFailed when it cannot be right."""
    if len(prefix) != 4:
        raise DecryptionFailed()
    (length,) = struct.unpack(">I", prefix)
    if length > segment_size + SEGMENT_OVERHEAD:
        raise DecryptionFailed()
    return int(length)
