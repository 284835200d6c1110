"""Cost bounded per message (issue 41, item 3): a KMIP request carries at most
``KM_KMIP_MAX_BATCH_ITEMS`` batch items (100 by default). The probe's auditor sent messages of 1,000
Query items (96 KB in, 544 KB out, 1.2-2 s of a worker's CPU each); one item over the bound is now
``Invalid Message`` before any item is done."""

from __future__ import annotations

from kmip.core import enums
from kmip.core.messages import payloads

from tests.kmip.server_fixtures import AUDITOR, KmipServer, kmip_server, read_response, request_message

__all__ = ["kmip_server"]

BOUND = 100
"""``KM_KMIP_MAX_BATCH_ITEMS``'s default (the KMIP test server keeps it)."""


def _queries(count: int) -> bytes:
    query = payloads.QueryRequestPayload(query_functions=[enums.QueryFunction.QUERY_OPERATIONS])
    return request_message([(enums.Operation.QUERY, query)] * count)


def test_a_message_of_more_batch_items_than_the_bound_is_refused_undone(kmip_server: KmipServer) -> None:
    with kmip_server.tls(AUDITOR) as raw:
        raw.sendall(_queries(BOUND))
        answered = read_response(raw)
        assert len(answered.batch_items) == BOUND
        assert all(item.result_status.value == enums.ResultStatus.SUCCESS for item in answered.batch_items)
        raw.sendall(_queries(BOUND + 1))
        refused = read_response(raw)
    assert len(refused.batch_items) == 1 and refused.batch_items[0].response_payload is None
    item = refused.batch_items[0]
    assert item.result_status.value == enums.ResultStatus.OPERATION_FAILED
    assert item.result_reason.value == enums.ResultReason.INVALID_MESSAGE
    assert f"at most {BOUND} batch items" in item.result_message.value
