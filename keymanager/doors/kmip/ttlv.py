"""The bounds a KMIP request passes before any decoder sees it (TTLV: tag, type, length, value).

Every TTLV item starts with 8 bytes: a 3-byte tag, a 1-byte type and a 4-byte big-endian length;
its value follows, padded to a multiple of 8. :func:`message_length` reads the first 8 bytes of a
request (the listener's only read before the whole message): a request message structure whose
length is at most the limit, or :class:`Malformed` — nothing is allocated for an unverified length.
:func:`check` then walks the whole message once, without recursion, before PyKMIP's decoder sees
it: every length agrees with the data and its parent, fixed-size types have their size, padding is
in the message, structures nest no deeper than the limit, every type is one of the
specification's and every tag in its ranges (``0x42xxxx`` standard, ``0x54xxxx`` extensions).
"""

from __future__ import annotations

import enum
import struct
from typing import NoReturn

HEADER_BYTES = 8
REQUEST_MESSAGE = 0x420078
"""The tag of a request message (the outermost structure of every request)."""


class ItemType(enum.IntEnum):
    STRUCTURE = 0x01
    INTEGER = 0x02
    LONG_INTEGER = 0x03
    BIG_INTEGER = 0x04
    ENUMERATION = 0x05
    BOOLEAN = 0x06
    TEXT_STRING = 0x07
    BYTE_STRING = 0x08
    DATE_TIME = 0x09
    INTERVAL = 0x0A
    DATE_TIME_EXTENDED = 0x0B


_FIXED = {
    ItemType.INTEGER: 4,
    ItemType.LONG_INTEGER: 8,
    ItemType.ENUMERATION: 4,
    ItemType.BOOLEAN: 8,
    ItemType.DATE_TIME: 8,
    ItemType.INTERVAL: 4,
    ItemType.DATE_TIME_EXTENDED: 8,
}
_TYPES = frozenset(int(t) for t in ItemType)
_TAG_RANGES = (0x42, 0x54)
"""The first byte of a tag: the specification's (``0x42``) or an extension's (``0x54``)."""


class Malformed(Exception):
    """A request that is not well-formed TTLV within the bounds; ``str()`` says why (no data of it)."""


def message_length(header: bytes, limit: int) -> int:
    """The length of the request message whose first 8 bytes are ``header``: Malformed unless it
    is a request message structure of at most ``limit`` bytes (a multiple of 8)."""
    if len(header) != HEADER_BYTES:
        raise Malformed("the message ends inside its header")
    tag, kind, length = _item_header(header, 0)
    if tag != REQUEST_MESSAGE or kind != ItemType.STRUCTURE:
        raise Malformed("the message is not a KMIP request message")
    if length > limit:
        raise Malformed(f"the message is longer than the limit of {limit} bytes")
    if length % 8:
        raise Malformed("a structure's length is not a multiple of 8")
    return length


def check(message: bytes, max_depth: int) -> None:
    """Malformed unless ``message`` is one well-formed TTLV request message within ``max_depth``
    levels of structures (see the module docstring)."""
    if len(message) < HEADER_BYTES:
        raise Malformed("the message ends inside its header")
    _, _, length = _item_header(message, 0)
    if HEADER_BYTES + length != len(message):
        raise Malformed("the message's length disagrees with its data")
    unpack, sizes = _HEADER.unpack_from, _SIZES
    ends = [len(message)]
    """The end of each open structure, innermost last."""
    end = ends[-1]
    offset = 0
    while offset < len(message):
        while offset == end:
            ends.pop()
            end = ends[-1]
        if offset + HEADER_BYTES > end:
            raise Malformed("an item's header runs past its structure")
        tag_and_type, length = unpack(message, offset)
        kind = tag_and_type & 0xFF
        size = sizes.get(kind)
        if (
            tag_and_type >> 24 not in _TAG_RANGES
            or size is None
            or (size >= 0 and length != size)
            or (size == _EIGHTS and length % 8)
        ):
            _refuse_item(tag_and_type >> 8, kind, length)
        start = offset + HEADER_BYTES
        if kind == _STRUCTURE:
            _check_structure(start + length, end, len(ends), max_depth)
            end = start + length
            ends.append(end)
            offset = start
            continue
        offset = start + (length + 7) // 8 * 8
        if offset > end:
            raise Malformed("an item's value runs past its structure")


_HEADER = struct.Struct(">II")
_ANY, _EIGHTS = -1, -2
_SIZES = {
    int(kind): _FIXED.get(kind, _EIGHTS if kind in (ItemType.BIG_INTEGER, ItemType.STRUCTURE) else _ANY)
    for kind in ItemType
}
"""Per item type (an int, as read): the length of its items, :data:`_ANY` or :data:`_EIGHTS` (a multiple of 8)."""
_STRUCTURE = int(ItemType.STRUCTURE)


def _check_structure(stop: int, parent_end: int, depth: int, max_depth: int) -> None:
    """Malformed unless a structure ending at ``stop`` fits in its parent and nests no deeper than ``max_depth``."""
    if stop > parent_end:
        raise Malformed("a structure's length runs past its parent")
    if depth > max_depth:
        raise Malformed(f"structures nest deeper than {max_depth} levels")


def _item_header(data: bytes, offset: int) -> tuple[int, int, int]:
    """Tag, type and length of the item at ``offset`` (struct.error when fewer than 8 bytes remain)."""
    tag_and_type, length = _HEADER.unpack_from(data, offset)
    return tag_and_type >> 8, tag_and_type & 0xFF, length


def _refuse_item(tag: int, kind: int, length: int) -> NoReturn:
    """Malformed, saying why the item of ``tag``, ``kind`` and ``length`` is not one :func:`check` passes."""
    if tag >> 16 not in _TAG_RANGES:
        raise Malformed(f"unknown tag 0x{tag:06x}")
    if kind not in _TYPES:
        raise Malformed(f"unknown item type 0x{kind:02x}")
    item_type = ItemType(kind)
    fixed = _FIXED.get(item_type)
    if fixed is not None and length != fixed:
        raise Malformed(f"an item of type {item_type.name.lower()} has length {length}, not {fixed}")
    raise Malformed(f"an item of type {item_type.name.lower()} has a length that is not a multiple of 8")


def children(data: bytes, offset: int) -> list[tuple[int, int, int]]:
    """The items directly inside the structure at ``offset`` of ``data`` (checked by :func:`check`):
    each one's tag and the range of its bytes, header included."""
    unpack = _HEADER.unpack_from
    _, length = unpack(data, offset)
    found = []
    position, end = offset + HEADER_BYTES, offset + HEADER_BYTES + length
    while position + HEADER_BYTES <= end:
        tag_and_type, size = unpack(data, position)
        stop = position + HEADER_BYTES + (size if tag_and_type & 0xFF == _STRUCTURE else (size + 7) // 8 * 8)
        found.append((tag_and_type >> 8, position, min(stop, end)))
        position = stop
    return found


def integer_value(item: bytes | None) -> int | None:
    """The value of an integer or enumeration item (all of its bytes, header included); None for
    no item or an item of another type."""
    if item is None or len(item) < HEADER_BYTES + 4 or item[3] not in (ItemType.INTEGER, ItemType.ENUMERATION):
        return None
    return int.from_bytes(item[HEADER_BYTES : HEADER_BYTES + 4], "big")


def byte_value(item: bytes | None) -> bytes | None:
    """The value of a byte or text string item (all of its bytes, header included), without its padding."""
    if item is None or len(item) < HEADER_BYTES or item[3] not in (ItemType.BYTE_STRING, ItemType.TEXT_STRING):
        return None
    length = int.from_bytes(item[4:8], "big")
    return item[HEADER_BYTES : HEADER_BYTES + length]
