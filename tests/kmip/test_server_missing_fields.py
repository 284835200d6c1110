"""Items whose payload is empty (the batch's ID placeholder names the object the item before made):
each is answered with a KMIP refusal — never an internal error, never a dropped connection — and
the connection goes on serving."""

from __future__ import annotations

import pytest
from kmip import enums
from kmip.core.messages import payloads

from tests.kmip.server_fixtures import OWNER, KmipServer, kmip_server, read_exactly, read_response, request_message
from tests.kmip.test_server_protocol import _create_payload

__all__ = ["kmip_server"]

RESULT_STATUS, RESULT_REASON, RESULT_MESSAGE = 0x42007F, 0x42007E, 0x42007D
DISCOVER = request_message([(enums.Operation.DISCOVER_VERSIONS, payloads.DiscoverVersionsRequestPayload())])


def _items(message: bytes) -> list[dict[int, bytes]]:
    """Each batch item of a response message, its fields by tag (read here: PyKMIP cannot read a
    MACVerify answer, not even a refusal)."""

    def inside(data: bytes) -> list[tuple[int, bytes]]:
        found, position = [], 8
        while position < len(data):
            tag, kind = int.from_bytes(data[position : position + 3], "big"), data[position + 3]
            size = int.from_bytes(data[position + 4 : position + 8], "big")
            padded = size if kind == 0x01 else (size + 7) // 8 * 8
            found.append((tag, data[position : position + 8 + padded]))
            position += 8 + padded
        return found

    return [dict(inside(item)) for tag, item in inside(message) if tag == 0x42000F]


def _enumeration(item: bytes) -> int:
    return int.from_bytes(item[8:12], "big")


def _empty() -> payloads.GetAttributeListRequestPayload:
    """A request payload with nothing in it (``42007901 00000000``), whatever the operation."""
    return payloads.GetAttributeListRequestPayload()


@pytest.mark.parametrize(
    ("operation", "reason"),
    [
        (enums.Operation.SIGN, enums.ResultReason.MISSING_DATA),  # was an internal error
        (enums.Operation.ENCRYPT, enums.ResultReason.MISSING_DATA),
        (enums.Operation.MAC_VERIFY, enums.ResultReason.INVALID_MESSAGE),  # was a closed connection
        (enums.Operation.REGISTER, enums.ResultReason.INVALID_FIELD),  # no object type; was an internal error
    ],
    ids=lambda v: getattr(v, "name", v),
)
def test_an_empty_payload_after_a_create_is_refused_and_the_connection_serves(
    kmip_server: KmipServer, operation: enums.Operation, reason: enums.ResultReason
) -> None:
    batch = request_message([(enums.Operation.CREATE, _create_payload()), (operation, _empty())])
    with kmip_server.tls(OWNER) as connection:
        connection.sendall(batch)
        head = read_exactly(connection, 8)
        created, refused = _items(head + read_exactly(connection, int.from_bytes(head[4:8], "big")))
        assert _enumeration(created[RESULT_STATUS]) == enums.ResultStatus.SUCCESS.value
        assert _enumeration(refused[RESULT_STATUS]) == enums.ResultStatus.OPERATION_FAILED.value
        assert _enumeration(refused[RESULT_REASON]) == reason.value, refused.get(RESULT_MESSAGE)
        connection.sendall(DISCOVER)
        assert read_response(connection).batch_items[0].result_status.value == enums.ResultStatus.SUCCESS
