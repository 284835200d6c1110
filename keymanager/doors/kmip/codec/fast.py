"""The hot path of the codec: Encrypt and Decrypt requests read, and their responses written, without
PyKMIP's classes (which read and write a byte at a time: about 1.7 ms of CPU per 1 KB Encrypt).

:func:`decode` takes a message that passed :func:`.ttlv.check` and answers a :class:`~.messages.Request`
only when every item of it is one this module knows exactly — a header of protocol version, maximum
response size, time stamp, batch error continuation option and batch count; batch items of
Encrypt or Decrypt with the fields PyKMIP reads in that version — and None otherwise, for
PyKMIP's decoder; it reads them straight into the door's requests (``doors/kmip/requests.py``).
:func:`encode` writes a response only when every result is a refusal or an Encrypt/Decrypt (or
MACVerify) answer of the door's, None otherwise. ``tests/kmip/test_server_fast_codec.py`` proves both equal
to PyKMIP's on every message they take (the same payload fields; the same response bytes).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from typing import Any

from kmip.core import enums

from keymanager.doors.kmip import spec, ttlv
from keymanager.doors.kmip.codec.messages import Item, Request, Result
from keymanager.doors.kmip.requests import CipherRequest, DecryptResponse, EncryptResponse, MacVerified, Parameters

T = enums.Tags
_1_4 = (1, 4)
_VERSIONS = frozenset(((1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (2, 0)))
# The tags this path reads and writes, as the ints of the wire (an enum member's ``.value`` costs a
# lookup per use on the hot path).
_REQUEST_HEADER = T.REQUEST_HEADER.value
_PROTOCOL_VERSION = T.PROTOCOL_VERSION.value
_VERSION_NUMBERS = [T.PROTOCOL_VERSION_MAJOR.value, T.PROTOCOL_VERSION_MINOR.value]
_MAXIMUM_RESPONSE_SIZE = T.MAXIMUM_RESPONSE_SIZE.value
_BATCH_ERROR_CONTINUATION_OPTION = T.BATCH_ERROR_CONTINUATION_OPTION.value
_TIME_STAMP = T.TIME_STAMP.value
_BATCH_COUNT = T.BATCH_COUNT.value
_BATCH_ITEM = T.BATCH_ITEM.value
_OPERATION = T.OPERATION.value
_UNIQUE_BATCH_ITEM_ID = T.UNIQUE_BATCH_ITEM_ID.value
_REQUEST_PAYLOAD = T.REQUEST_PAYLOAD.value
_UNIQUE_IDENTIFIER = T.UNIQUE_IDENTIFIER.value
_CRYPTOGRAPHIC_PARAMETERS = T.CRYPTOGRAPHIC_PARAMETERS.value
_CONTINUE = enums.BatchErrorContinuationOption.CONTINUE.value
_BYTE_STRING = int(ttlv.ItemType.BYTE_STRING)
_TEXT_STRING = int(ttlv.ItemType.TEXT_STRING)
_INTEGER = int(ttlv.ItemType.INTEGER)
_ENUMERATION = int(ttlv.ItemType.ENUMERATION)
_BOOLEAN = int(ttlv.ItemType.BOOLEAN)
_NUMBERS = (_INTEGER, _ENUMERATION)


def _order(*tags: enums.Tags) -> dict[int, int]:
    """Each of ``tags`` (as an int) with its place among them."""
    return {tag.value: rank for rank, tag in enumerate(tags)}


_HEADER_ORDER = _order(T.MAXIMUM_RESPONSE_SIZE, T.BATCH_ERROR_CONTINUATION_OPTION, T.TIME_STAMP, T.BATCH_COUNT)
"""The header fields this path reads, each with its place in the order the specification gives them."""
_OPERATIONS = {op.value: op for op in (spec.Operation.ENCRYPT, spec.Operation.DECRYPT, spec.Operation.MAC_VERIFY)}
"""The operations this path reads (MACVerify only here: PyKMIP's codec has no payload for it)."""


def _members(kind: type[enum.Enum]) -> dict[int, Any]:
    return {member.value: member for member in kind}


_PARAMETERS: dict[int, tuple[str, Any]] = {
    T.BLOCK_CIPHER_MODE.value: ("block_cipher_mode", _members(spec.BlockCipherMode)),
    T.PADDING_METHOD.value: ("padding_method", _members(spec.PaddingMethod)),
    T.CRYPTOGRAPHIC_ALGORITHM.value: ("cryptographic_algorithm", _members(spec.CryptographicAlgorithm)),
    T.RANDOM_IV.value: ("random_iv", bool),
    T.TAG_LENGTH.value: ("tag_length", int),
    T.IV_LENGTH.value: ("iv_length", int),
}
"""The Cryptographic Parameters this path reads: each one's attribute and type (an enumeration: its members)."""
_PARAMETER_ORDER = _order(
    T.BLOCK_CIPHER_MODE,
    T.PADDING_METHOD,
    T.HASHING_ALGORITHM,
    T.KEY_ROLE_TYPE,
    T.DIGITAL_SIGNATURE_ALGORITHM,
    T.CRYPTOGRAPHIC_ALGORITHM,
    T.RANDOM_IV,
    T.IV_LENGTH,
    T.TAG_LENGTH,
)
"""The place of each Cryptographic Parameter in the order the specification (and PyKMIP) has them."""
_BYTE_FIELDS = {
    T.DATA.value: "data",
    T.IV_COUNTER_NONCE.value: "iv_counter_nonce",
    T.AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA.value: "auth_additional_data",
    T.AUTHENTICATED_ENCRYPTION_TAG.value: "auth_tag",
    T.MAC_DATA.value: "mac_data",
}


_CIPHER = (T.UNIQUE_IDENTIFIER, T.CRYPTOGRAPHIC_PARAMETERS, T.DATA, T.IV_COUNTER_NONCE)
_PAYLOAD_ORDER = {
    # (operation, version >= 1.4): the payload's fields, each with its place in their order
    (spec.Operation.ENCRYPT, False): _order(*_CIPHER),
    (spec.Operation.ENCRYPT, True): _order(*_CIPHER, T.AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA),
    (spec.Operation.DECRYPT, False): _order(*_CIPHER),
    (spec.Operation.DECRYPT, True): _order(
        *_CIPHER, T.AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, T.AUTHENTICATED_ENCRYPTION_TAG
    ),
    (spec.Operation.MAC_VERIFY, False): _order(T.UNIQUE_IDENTIFIER, T.CRYPTOGRAPHIC_PARAMETERS, T.DATA, T.MAC_DATA),
    (spec.Operation.MAC_VERIFY, True): _order(T.UNIQUE_IDENTIFIER, T.CRYPTOGRAPHIC_PARAMETERS, T.DATA, T.MAC_DATA),
}
"""The fields a payload of this path may hold, per operation and version, in their order."""


class _Unknown(Exception):
    """A field or layout this path does not read: PyKMIP's decoder reads the message instead."""


def decode(message: bytes, served: frozenset[spec.Operation], max_items: int) -> Request | None:
    """The request in ``message`` (checked by :func:`.ttlv.check`) when this path reads all of it; else None."""
    try:
        return _decode(message, served, max_items)
    except _Unknown:
        return None


def _decode(message: bytes, served: frozenset[spec.Operation], max_items: int) -> Request:
    children = ttlv.children(message, 0)
    if not children or children[0][0] != _REQUEST_HEADER or len(children) - 1 > max_items:
        raise _Unknown()
    version, fields = _header(message, children[0][1])
    if version not in _VERSIONS or fields.get(_BATCH_COUNT) != len(children) - 1:
        raise _Unknown()
    items = [_item(message, start, version, served) for tag, start, _ in children[1:] if tag == _BATCH_ITEM]
    if len(items) != len(children) - 1:
        raise _Unknown()
    return Request(
        version,
        items,
        stop_on_error=fields.get(_BATCH_ERROR_CONTINUATION_OPTION) != _CONTINUE,
        max_response_size=fields.get(_MAXIMUM_RESPONSE_SIZE),
    )


def _header(message: bytes, offset: int) -> tuple[tuple[int, int], dict[int, int]]:
    children = ttlv.children(message, offset)
    if not children or children[0][0] != _PROTOCOL_VERSION:
        raise _Unknown()
    numbers = ttlv.children(message, children[0][1])
    if [tag for tag, _, _ in numbers] != _VERSION_NUMBERS:
        raise _Unknown()
    version = (_number(message, numbers[0][1]), _number(message, numbers[1][1]))
    fields: dict[int, int] = {}
    place = -1
    for tag, start, _ in children[1:]:
        rank = _HEADER_ORDER.get(tag, -1)
        if rank <= place:  # unknown, repeated or out of order
            raise _Unknown()
        place = rank
        fields[tag] = _number(message, start)
    if _BATCH_COUNT not in fields:
        raise _Unknown()
    return version, fields


def _item(message: bytes, offset: int, version: tuple[int, int], served: frozenset[spec.Operation]) -> Item:
    children = ttlv.children(message, offset)
    if not children or children[0][0] != _OPERATION:
        raise _Unknown()
    operation = _OPERATIONS.get(_number(message, children[0][1]))
    if operation is None or operation not in served:
        raise _Unknown()
    batch_id = None
    rest = children[1:]
    if rest and rest[0][0] == _UNIQUE_BATCH_ITEM_ID:
        batch_id = _bytes(message, rest[0][1], _BYTE_STRING)
        rest = rest[1:]
    if len(rest) != 1 or rest[0][0] != _REQUEST_PAYLOAD:
        raise _Unknown()
    return Item(operation, batch_id, payload=_payload(message, rest[0][1], version, operation))


def _payload(message: bytes, offset: int, version: tuple[int, int], operation: spec.Operation) -> CipherRequest:
    order = _PAYLOAD_ORDER[operation, version >= _1_4]
    request = CipherRequest()
    place = -1
    for tag, start, _ in ttlv.children(message, offset):
        rank = order.get(tag, -1)
        if rank <= place:
            raise _Unknown()  # unknown, repeated or out of order: PyKMIP's reading decides
        place = rank
        if tag == _UNIQUE_IDENTIFIER:
            request.unique_identifier = _text(message, start)
        elif tag == _CRYPTOGRAPHIC_PARAMETERS:
            request.cryptographic_parameters = _parameters(message, start)
        else:
            setattr(request, _BYTE_FIELDS[tag], _bytes(message, start, _BYTE_STRING))
    if request.data is None:
        raise _Unknown()
    return request


def _parameters(message: bytes, offset: int) -> Parameters:
    found = Parameters()
    place = -1
    for tag, start, _ in ttlv.children(message, offset):
        rank = _PARAMETER_ORDER.get(tag, -1)
        read = _PARAMETERS.get(tag)
        if read is None or rank <= place:
            raise _Unknown()
        place = rank
        name, kind = read
        if kind is bool:
            value: Any = _boolean(message, start)
        elif kind is int:
            value = _number(message, start, _INTEGER)
        else:
            value = kind.get(_number(message, start, _ENUMERATION))
            if value is None:
                raise _Unknown()
        setattr(found, name, value)
    return found


def _number(message: bytes, offset: int, kind: int | None = None) -> int:
    item_type = message[offset + 3]
    if item_type not in _NUMBERS or (kind is not None and item_type != kind):
        raise _Unknown()
    return int.from_bytes(message[offset + 8 : offset + 12], "big", signed=item_type == _INTEGER)


def _boolean(message: bytes, offset: int) -> bool:
    if message[offset + 3] != _BOOLEAN:
        raise _Unknown()
    value = int.from_bytes(message[offset + 8 : offset + 16], "big")
    if value not in (0, 1):
        raise _Unknown()
    return value == 1


def _bytes(message: bytes, offset: int, kind: int) -> bytes:
    if message[offset + 3] != kind:
        raise _Unknown()
    length = int.from_bytes(message[offset + 4 : offset + 8], "big")
    return bytes(message[offset + 8 : offset + 8 + length])


def _text(message: bytes, offset: int) -> str:
    try:
        return _bytes(message, offset, _TEXT_STRING).decode("utf-8")
    except UnicodeDecodeError:
        raise _Unknown() from None


# -- responses ---------------------------------------------------------------------------------

_ANSWERS = (EncryptResponse, DecryptResponse, MacVerified)
_RESPONSE_MESSAGE = T.RESPONSE_MESSAGE.value
_RESPONSE_HEADER = T.RESPONSE_HEADER.value
_PROTOCOL_VERSION_MAJOR, _PROTOCOL_VERSION_MINOR = _VERSION_NUMBERS
_RESULT_STATUS = T.RESULT_STATUS.value
_RESULT_REASON = T.RESULT_REASON.value
_RESULT_MESSAGE = T.RESULT_MESSAGE.value
_RESPONSE_PAYLOAD = T.RESPONSE_PAYLOAD.value
_VALIDITY_INDICATOR = T.VALIDITY_INDICATOR.value
_DATA = T.DATA.value
_IV_COUNTER_NONCE = T.IV_COUNTER_NONCE.value
_AUTHENTICATED_ENCRYPTION_TAG = T.AUTHENTICATED_ENCRYPTION_TAG.value
_STRUCTURE = int(ttlv.ItemType.STRUCTURE)
_DATE_TIME = int(ttlv.ItemType.DATE_TIME)
_FAILED = enums.ResultStatus.OPERATION_FAILED.value
_SUCCESS = enums.ResultStatus.SUCCESS.value
_VALID, _INVALID = enums.ValidityIndicator.VALID.value, enums.ValidityIndicator.INVALID.value


def encode(version: tuple[int, int], results: Sequence[Result], max_size: int | None) -> bytes | None:
    """The response message answering ``results`` when each is a refusal or an Encrypt/Decrypt
    answer (else None, for PyKMIP's encoder); None too when it would exceed ``max_size``."""
    if not all(r.refusal is not None or isinstance(r.payload, _ANSWERS) for r in results):
        return None
    header = _structure(
        _RESPONSE_HEADER,
        _structure(
            _PROTOCOL_VERSION,
            _integer(_PROTOCOL_VERSION_MAJOR, version[0]),
            _integer(_PROTOCOL_VERSION_MINOR, version[1]),
        ),
        _ttlv(_TIME_STAMP, _DATE_TIME, int(time.time()).to_bytes(8, "big")),
        _integer(_BATCH_COUNT, len(results)),
    )
    body = _structure(_RESPONSE_MESSAGE, header, *(_batch_item(version, result) for result in results))
    return None if max_size is not None and len(body) > max_size else body


def _batch_item(version: tuple[int, int], result: Result) -> bytes:
    parts = []
    if result.item.operation is not None:
        parts.append(_enumeration(_OPERATION, result.item.operation.value))
    if result.item.batch_id is not None:
        parts.append(_ttlv(_UNIQUE_BATCH_ITEM_ID, _BYTE_STRING, result.item.batch_id))
    refusal = result.refusal
    if refusal is not None:
        parts.append(_enumeration(_RESULT_STATUS, _FAILED))
        parts.append(_enumeration(_RESULT_REASON, refusal.reason.value))
        parts.append(_ttlv(_RESULT_MESSAGE, _TEXT_STRING, refusal.message.encode("utf-8")))
    else:
        parts.append(_enumeration(_RESULT_STATUS, _SUCCESS))
        parts.append(_answer(version, result.payload))
    return _structure(_BATCH_ITEM, *parts)


def _answer(version: tuple[int, int], payload: Any) -> bytes:
    fields = [_ttlv(_UNIQUE_IDENTIFIER, _TEXT_STRING, str(payload.unique_identifier).encode())]
    if isinstance(payload, MacVerified):
        fields.append(_enumeration(_VALIDITY_INDICATOR, _VALID if payload.valid else _INVALID))
        return _structure(_RESPONSE_PAYLOAD, *fields)
    fields.append(_ttlv(_DATA, _BYTE_STRING, payload.data))
    if isinstance(payload, EncryptResponse):
        if payload.iv_counter_nonce:
            fields.append(_ttlv(_IV_COUNTER_NONCE, _BYTE_STRING, payload.iv_counter_nonce))
        if version >= _1_4 and payload.auth_tag:
            fields.append(_ttlv(_AUTHENTICATED_ENCRYPTION_TAG, _BYTE_STRING, payload.auth_tag))
    return _structure(_RESPONSE_PAYLOAD, *fields)


def _ttlv(tag: int, kind: int, value: bytes) -> bytes:
    return tag.to_bytes(3, "big") + bytes((kind,)) + len(value).to_bytes(4, "big") + value + bytes(-len(value) % 8)


def _structure(tag: int, *items: bytes) -> bytes:
    return _ttlv(tag, _STRUCTURE, b"".join(items))


def _integer(tag: int, value: int) -> bytes:
    return _ttlv(tag, _INTEGER, value.to_bytes(4, "big", signed=True))


def _enumeration(tag: int, value: int) -> bytes:
    return _ttlv(tag, _ENUMERATION, value.to_bytes(4, "big"))
