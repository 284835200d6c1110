"""An independent KMEV decryptor, written from docs/envelope-format.md alone.

It uses ``cryptography`` and the standard library only — nothing from ``keymanager_sdk`` — so
that the vectors check the document as much as the SDK. It works on whole byte strings for
clarity, not speed.
"""

from __future__ import annotations

import json

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


class Refused(Exception):
    """The envelope is not valid (any reason)."""


def _canonical(context: dict[str, str]) -> bytes:
    return json.dumps(context, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_header(envelope: bytes) -> tuple[dict[str, object], int]:
    """The header's fields and its length in bytes."""
    try:
        return _parse_header(envelope)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused("header text is not valid") from exc


def _parse_header(envelope: bytes) -> tuple[dict[str, object], int]:
    if len(envelope) < 19 or envelope[0:4] != b"KMEV" or envelope[4] != 1 or envelope[5] != 1:
        raise Refused("not a version 1 / algorithm 1 envelope")
    segment_size = int.from_bytes(envelope[6:10], "big")
    prefix = envelope[10:17]
    wrapped_length = int.from_bytes(envelope[17:19], "big")
    if not 65536 <= segment_size <= 1048576 or wrapped_length == 0:
        raise Refused("segment size or wrapped key length")
    at = 19 + wrapped_length
    if len(envelope) < at + 2:
        raise Refused("short header")
    wrapped = envelope[19:at].decode("ascii")
    context_length = int.from_bytes(envelope[at : at + 2], "big")
    raw = envelope[at + 2 : at + 2 + context_length]
    if len(raw) != context_length:
        raise Refused("short context")
    context = None
    if context_length:
        context = json.loads(raw.decode("utf-8"))
        if not isinstance(context, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in context.items()
        ):
            raise Refused("context is not an object of strings")
        if _canonical(context) != raw:
            raise Refused("context is not canonical")
    fields = {"segment_size": segment_size, "nonce_prefix": prefix, "wrapped_key": wrapped, "context": context}
    return fields, at + 2 + context_length


def decrypt(envelope: bytes, data_key: bytes) -> bytes:
    """The plaintext of ``envelope``; raises ``Refused`` (or ``InvalidTag`` wrapped in it) when it is not valid."""
    if len(data_key) != 32:
        raise Refused("data key must be 32 bytes")
    fields, header_length = parse_header(envelope)
    header = envelope[:header_length]
    body = envelope[header_length:]
    full = int(fields["segment_size"]) + 16  # type: ignore[call-overload]
    aead = AESGCM(data_key)
    plaintext = bytearray()
    index = 0
    position = 0
    while True:
        segment = body[position : position + full]
        position += len(segment)
        last = position >= len(body)
        if len(segment) < 16 or (last and index > 0 and len(segment) == 16):
            raise Refused("truncated")
        nonce = bytes(fields["nonce_prefix"]) + index.to_bytes(4, "big") + (b"\x01" if last else b"\x00")  # type: ignore[arg-type]
        try:
            plaintext += aead.decrypt(nonce, segment, header)
        except InvalidTag as exc:
            raise Refused("segment does not authenticate") from exc
        if last:
            return bytes(plaintext)
        index += 1
        if index >= 2**32:
            raise Refused("too many segments")
