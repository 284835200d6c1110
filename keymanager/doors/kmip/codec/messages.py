"""KMIP request and response messages: PyKMIP's codec (``kmip.core``) behind the bounds of :mod:`.ttlv`.

:func:`decode` takes a request message that passed :func:`.ttlv.check` and decodes its header, then
each batch item on its own, with PyKMIP's classes in the protocol version the header names: an
item whose operation this server does not serve is not decoded at all (it is answered
``Operation Not Supported``), an item PyKMIP cannot read is answered ``Invalid Message`` on its own.
Whatever PyKMIP raises is caught here and becomes a :class:`KmipRefusal`; nothing escapes. Each
payload read is handed on as the door's request (:func:`.payloads.request`).
:func:`encode` writes the response in the version of the request, one result per item
(status, reason, message as the specification defines; the payloads :func:`.payloads.written`
made), and :func:`error_response` the answer to a message that cannot be read at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kmip.core import enums, utils
from kmip.core import objects as core_objects
from kmip.core.factories.payloads.request import RequestPayloadFactory
from kmip.core.messages import contents, messages

from keymanager.doors.kmip import spec, ttlv
from keymanager.doors.kmip.codec import attributes as codec_attributes
from keymanager.doors.kmip.codec import payloads
from keymanager.doors.kmip.refusals import KmipRefusal, Reason, not_supported
from keymanager.doors.kmip.requests import AttributeChange
from keymanager.doors.kmip.spec import VERSIONS

log = logging.getLogger(__name__)

Operation = spec.Operation
_KMIP_VERSIONS = {
    (1, 0): enums.KMIPVersion.KMIP_1_0,
    (1, 1): enums.KMIPVersion.KMIP_1_1,
    (1, 2): enums.KMIPVersion.KMIP_1_2,
    (1, 3): enums.KMIPVersion.KMIP_1_3,
    (1, 4): enums.KMIPVersion.KMIP_1_4,
    (2, 0): enums.KMIPVersion.KMIP_2_0,
}
_REQUEST_HEADER = 0x420077
_BATCH_ITEM = 0x42000F
_OPERATION = 0x42005C
_BATCH_ITEM_ID = 0x420093
_REQUEST_PAYLOAD = 0x420079
_PAYLOADS = RequestPayloadFactory()
"""Empty payloads, for items PyKMIP cannot read without the unique identifier they leave to the ID placeholder."""


@dataclass
class Item:
    """One batch item of a request: its operation (None: a number this codec does not know), its id,
    its decoded payload, or why it could not be decoded."""

    operation: spec.Operation | None
    batch_id: bytes | None
    payload: Any = None
    refusal: KmipRefusal | None = None


@dataclass
class Request:
    """A decoded request message: the protocol version it speaks, its batch items, and the header's
    choices the answer follows."""

    version: tuple[int, int]
    items: list[Item]
    stop_on_error: bool = True
    """Whether the items after a failed one are left undone (the default; ``Continue`` says otherwise)."""
    max_response_size: int | None = None


def decode(message: bytes, served: frozenset[spec.Operation], max_items: int) -> Request:
    """The request in ``message`` (checked by :func:`.ttlv.check`): KmipRefusal (Invalid Message, or
    the protocol version's refusal) when its header cannot be read; an item that cannot be read
    carries its own refusal, an operation outside ``served`` is never decoded."""
    children = ttlv.children(message, 0)
    if not children or children[0][0] != _REQUEST_HEADER:
        raise KmipRefusal(Reason.INVALID_MESSAGE, "the request message does not begin with a request header")
    header = _header(message[children[0][1] : children[0][2]])
    version = (int(header.protocol_version.major), int(header.protocol_version.minor))
    if version not in _KMIP_VERSIONS:
        raise KmipRefusal(
            Reason.INVALID_MESSAGE, f"KMIP {version[0]}.{version[1]} is not served (see DiscoverVersions)"
        )
    batch = children[1:]
    if len(batch) > max_items:
        raise KmipRefusal(Reason.INVALID_MESSAGE, f"a request holds at most {max_items} batch items")
    if any(tag != _BATCH_ITEM for tag, _, _ in batch) or int(header.batch_count.value) != len(batch):
        raise KmipRefusal(Reason.INVALID_MESSAGE, "the batch count disagrees with the batch items")
    items = [_item(message[start:end], _KMIP_VERSIONS[version], served) for _, start, end in batch]
    option = header.batch_error_cont_option
    size = header.maximum_response_size
    return Request(
        version,
        items,
        stop_on_error=option is None or option.value != enums.BatchErrorContinuationOption.CONTINUE,
        max_response_size=None if size is None else int(size.value),
    )


def _header(raw: bytes) -> messages.RequestHeader:
    header = messages.RequestHeader()
    try:
        header.read(utils.BytearrayStream(raw))
    except Exception as exc:  # PyKMIP's errors are of many kinds; every one is the client's message
        log.info("unreadable KMIP request header: %s", type(exc).__name__)
        raise KmipRefusal(Reason.INVALID_MESSAGE, "the request header cannot be read") from None
    if header.protocol_version is None or header.batch_count is None:
        raise KmipRefusal(Reason.INVALID_MESSAGE, "the request header lacks its protocol version or batch count")
    return header


def _item(raw: bytes, version: enums.KMIPVersion, served: frozenset[spec.Operation]) -> Item:
    """One batch item: decoded when its operation is served, else refused without decoding it."""
    fields = {tag: raw[start:end] for tag, start, end in ttlv.children(raw, 0)}
    batch_id = ttlv.byte_value(fields.get(_BATCH_ITEM_ID))
    code = ttlv.integer_value(fields.get(_OPERATION))
    try:
        operation = spec.Operation(code) if code is not None else None
    except ValueError:
        operation = None
    if operation is None or operation not in served:
        return Item(operation, batch_id, refusal=not_supported("this operation is not offered by this server"))
    if operation is spec.Operation.ADD_ATTRIBUTE:
        return _add_attribute(fields, operation, batch_id, version)
    decoded = messages.RequestBatchItem()
    try:
        decoded.read(utils.BytearrayStream(raw), kmip_version=version)
    except Exception as exc:
        if fields.get(_REQUEST_PAYLOAD, b"")[4:8] == bytes(4):  # empty: the batch's ID placeholder names the object
            empty = _empty_payload(operation)
            if empty is not None:
                return _read(operation, batch_id, empty)
        log.info("unreadable KMIP %s request: %s", operation.name, type(exc).__name__)
        return Item(operation, batch_id, refusal=KmipRefusal(Reason.INVALID_MESSAGE, "the batch item cannot be read"))
    return _read(operation, batch_id, decoded.request_payload)


def _empty_payload(operation: spec.Operation) -> Any:
    """PyKMIP's empty request payload of ``operation``; None for one PyKMIP has none of (MACVerify)."""
    try:
        return _PAYLOADS.create(enums.Operation(operation.value))
    except Exception:  # NotImplementedError, and whatever else its factory raises: nothing to read into
        return None


def _add_attribute(
    fields: dict[int, bytes], operation: spec.Operation, batch_id: bytes | None, version: enums.KMIPVersion
) -> Item:
    """AddAttribute (1.x: a unique identifier and an Attribute), read field by field with PyKMIP's Attribute."""
    payload = fields.get(_REQUEST_PAYLOAD)
    inside = {tag: payload[start:end] for tag, start, end in ttlv.children(payload, 0)} if payload else {}
    raw_attribute = inside.get(enums.Tags.ATTRIBUTE.value)
    if raw_attribute is None or version >= enums.KMIPVersion.KMIP_2_0:
        return Item(
            operation, batch_id, refusal=not_supported("AddAttribute takes KMIP 1.x's Attribute (2.0: SetAttribute)")
        )
    attribute = core_objects.Attribute()
    try:
        attribute.read(utils.BytearrayStream(raw_attribute), kmip_version=version)
        uid = ttlv.byte_value(inside.get(enums.Tags.UNIQUE_IDENTIFIER.value))
        text = None if uid is None else uid.decode("utf-8")
    except Exception as exc:
        log.info("unreadable KMIP AddAttribute request: %s", type(exc).__name__)
        return Item(operation, batch_id, refusal=KmipRefusal(Reason.INVALID_MESSAGE, "the batch item cannot be read"))
    return Item(operation, batch_id, payload=AttributeChange(text, attribute=codec_attributes.read(attribute)))


def _read(operation: spec.Operation, batch_id: bytes | None, payload: Any) -> Item:
    """The item of PyKMIP's ``payload``, as the door's request (see :func:`.payloads.request`)."""
    try:
        return Item(operation, batch_id, payload=payloads.request(operation, payload))
    except Exception as exc:  # a payload PyKMIP read but the door's types cannot hold: the client's
        log.info("untranslatable KMIP %s request: %s", operation.name, type(exc).__name__)
        return Item(operation, batch_id, refusal=KmipRefusal(Reason.INVALID_MESSAGE, "the batch item cannot be read"))


@dataclass
class Result:
    """The answer to one batch item: a payload, or a refusal."""

    item: Item
    payload: Any = None
    refusal: KmipRefusal | None = None


def encode(version: tuple[int, int], results: Sequence[Result], max_size: int | None) -> bytes:
    """The response message answering ``results`` in protocol ``version``; a response larger than
    ``max_size`` (the request's Maximum Response Size) is answered Response Too Large instead."""
    body = _response(version, [_batch_item(result) for result in results])
    if max_size is not None and len(body) > max_size:
        refused = [
            Result(r.item, refusal=KmipRefusal(Reason.RESPONSE_TOO_LARGE, "the response is too large")) for r in results
        ]
        body = _response(version, [_batch_item(result) for result in refused])
    return body


def error_response(version: tuple[int, int], refusal: KmipRefusal) -> bytes:
    """A response of one failed item without operation: the answer to a message that cannot be served."""
    return _response(version, [_batch_item(Result(Item(None, None), refusal=refusal))])


def answer_version(requested: tuple[int, int] | None) -> tuple[int, int]:
    """The version to answer a request in: its own when served, else the highest served below it, else 1.0."""
    if requested in _KMIP_VERSIONS:
        assert requested is not None
        return requested
    below = [v for v in VERSIONS if requested is not None and v < requested]
    return below[0] if below else (1, 0)


def _batch_item(result: Result) -> messages.ResponseBatchItem:
    refusal = result.refusal
    item = result.item
    return messages.ResponseBatchItem(
        operation=None if item.operation is None else contents.Operation(enums.Operation(item.operation.value)),
        unique_batch_item_id=None if item.batch_id is None else contents.UniqueBatchItemID(item.batch_id),
        result_status=contents.ResultStatus(
            enums.ResultStatus.SUCCESS if refusal is None else enums.ResultStatus.OPERATION_FAILED
        ),
        result_reason=None if refusal is None else contents.ResultReason(enums.ResultReason(refusal.reason.value)),
        result_message=None if refusal is None else contents.ResultMessage(refusal.message),
        response_payload=None if refusal is not None else payloads.wire(result.payload),
    )


def _response(version: tuple[int, int], items: list[messages.ResponseBatchItem]) -> bytes:
    header = messages.ResponseHeader(
        protocol_version=contents.ProtocolVersion(*version),
        time_stamp=contents.TimeStamp(int(time.time())),
        batch_count=contents.BatchCount(len(items)),
    )
    stream = utils.BytearrayStream()
    messages.ResponseMessage(response_header=header, batch_items=items).write(
        stream, kmip_version=_KMIP_VERSIONS[version]
    )
    return bytes(stream.buffer)
