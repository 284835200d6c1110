"""The KMIP decoder under arbitrary bytes: the TTLV bounds, then PyKMIP's codec per batch item.

Whatever the bytes — random, or a valid request with bytes flipped, cut or lengths changed —
nothing escapes but the refusals the door answers (``Malformed``, ``KmipRefusal``), and what
decoding allocates stays within a bound of the message's size (no length field is trusted).
"""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kmip.core import enums, utils
from kmip.core.messages import contents, messages, payloads

from keymanager.doors.kmip import spec, ttlv
from keymanager.doors.kmip.codec import decode
from keymanager.doors.kmip.refusals import KmipRefusal

pytestmark = pytest.mark.interop  # make test-interop: hypothesis

SERVED = frozenset(spec.Operation)
MAX_DEPTH = 16


def _request(operation: enums.Operation, payload: object, version: tuple[int, int] = (1, 2)) -> bytes:
    header = messages.RequestHeader(
        protocol_version=contents.ProtocolVersion(*version), batch_count=contents.BatchCount(1)
    )
    item = messages.RequestBatchItem(operation=contents.Operation(operation), request_payload=payload)
    stream = utils.BytearrayStream()
    messages.RequestMessage(request_header=header, batch_items=[item]).write(stream)
    return bytes(stream.buffer)


VALID = [
    _request(enums.Operation.GET, payloads.GetRequestPayload(unique_identifier="a" * 32)),
    _request(
        enums.Operation.ENCRYPT,
        payloads.EncryptRequestPayload(unique_identifier="b" * 32, data=b"x" * 40, iv_counter_nonce=b"i" * 16),
    ),
    _request(enums.Operation.DISCOVER_VERSIONS, payloads.DiscoverVersionsRequestPayload()),
    _request(enums.Operation.LOCATE, payloads.LocateRequestPayload(maximum_items=3), (2, 0)),
]


def _decoded(message: bytes) -> None:
    """Decode as the door does (the hot path, then PyKMIP's); only its refusals may come out."""
    try:
        ttlv.check(message, MAX_DEPTH)
        decode(message, SERVED, 1000)
    except (ttlv.Malformed, KmipRefusal):
        pass


def _bounded(message: bytes) -> None:
    tracemalloc.start()
    try:
        _decoded(message)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * len(message) + 512 * 1024, f"decoding {len(message)} bytes took {peak} bytes"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_random_bytes_are_refused_or_decoded(data: bytes) -> None:
    _bounded(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(VALID),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=255)), max_size=8
    ),
    st.integers(min_value=0, max_value=10_000),
)
def test_valid_requests_with_bytes_changed_or_cut(message: bytes, flips: list[tuple[int, int]], cut: int) -> None:
    changed = bytearray(message)
    for position, value in flips:
        changed[position % len(changed)] = value
    _bounded(bytes(changed[: max(8, len(changed) - cut % len(changed))]))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VALID), st.integers(min_value=0, max_value=2**32 - 1), st.integers(min_value=0, max_value=200))
def test_any_length_field_set_to_any_value(message: bytes, length: int, item: int) -> None:
    """Every item's length field (found by walking the message) set to a value that may lie."""
    offsets = _item_offsets(message)
    offset = offsets[item % len(offsets)]
    changed = bytearray(message)
    changed[offset + 4 : offset + 8] = length.to_bytes(4, "big")
    _bounded(bytes(changed))


def test_a_valid_request_decodes() -> None:
    for message in VALID:
        ttlv.check(message, MAX_DEPTH)
        request = decode(message, SERVED, 1000)
        assert len(request.items) == 1 and request.items[0].refusal is None


def _item_offsets(message: bytes) -> list[int]:
    found = [0]
    stack = [0]
    while stack:
        offset = stack.pop()
        for _, start, _ in ttlv.children(message, offset):
            found.append(start)
            if message[start + 3] == ttlv.ItemType.STRUCTURE:
                stack.append(start)
    return found
