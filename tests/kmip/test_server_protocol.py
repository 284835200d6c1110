"""The protocol: versions (DiscoverVersions, each request answered in its own), Query, batches with
a result per item, Operation Not Supported, AES-GCM, and the refusals, each audited."""

from __future__ import annotations

import ssl
import time
from typing import Any

import pytest
from kmip import enums
from kmip.core import attributes, objects
from kmip.core.factories.attributes import AttributeFactory
from kmip.core.messages import payloads
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import (
    AUDITOR,
    OWNER,
    KmipServer,
    closed,
    create_aes,
    kmip_server,
    read_response,
    request_message,
)

__all__ = ["kmip_server"]

_FACTORY = AttributeFactory()


def _create_payload(length: int = 256) -> payloads.CreateRequestPayload:
    template = objects.TemplateAttribute(
        attributes=[
            _FACTORY.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_ALGORITHM, enums.CryptographicAlgorithm.AES),
            _FACTORY.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_LENGTH, length),
            _FACTORY.create_attribute(
                enums.AttributeType.CRYPTOGRAPHIC_USAGE_MASK,
                [enums.CryptographicUsageMask.ENCRYPT, enums.CryptographicUsageMask.DECRYPT],
            ),
        ]
    )
    return payloads.CreateRequestPayload(object_type=enums.ObjectType.SYMMETRIC_KEY, template_attribute=template)


def test_discover_versions_lists_2_0_down_to_1_0(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as client:
        versions = client.proxy.discover_versions().protocol_versions
    assert [(v.major, v.minor) for v in versions] == [(2, 0), (1, 4), (1, 3), (1, 2), (1, 1), (1, 0)]


def test_query_names_the_operations_and_object_types(kmip_server: KmipServer) -> None:
    with kmip_server.connected(AUDITOR) as client:
        functions = [enums.QueryFunction.QUERY_OPERATIONS, enums.QueryFunction.QUERY_OBJECTS]
        answer = client.proxy.query(query_functions=functions)
    assert {enums.Operation.CREATE, enums.Operation.ENCRYPT, enums.Operation.REGISTER} <= set(answer.operations)
    assert enums.ObjectType.SECRET_DATA in answer.object_types


@pytest.mark.parametrize(
    "version", [enums.KMIPVersion.KMIP_1_0, enums.KMIPVersion.KMIP_1_4, enums.KMIPVersion.KMIP_2_0]
)
def test_each_version_is_answered_in_kind(kmip_server: KmipServer, version: enums.KMIPVersion) -> None:
    with kmip_server.connected(OWNER, kmip_version=version) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, 256, name=f"v-{version.value}")
        client.activate(uid)
        _, found = client.get_attributes(uid, ["State"])
        assert found[0].attribute_value.value == enums.State.ACTIVE
        sealed, nonce = client.encrypt(b"data", uid=uid, cryptographic_parameters={"random_iv": True})
        assert client.decrypt(sealed, uid=uid, iv_counter_nonce=nonce) == b"data"


def test_aes_gcm_with_iv_aad_and_tag(kmip_server: KmipServer) -> None:
    """KMIP 1.4 and later (the AAD and the tag are 1.4's fields; ProxyKmipClient sends neither)."""
    aad = b"header"
    uid = create_aes(kmip_server, OWNER)  # an AES_256_GCM key: its Create named GCM
    encrypt = payloads.EncryptRequestPayload(
        unique_identifier=uid, cryptographic_parameters=_gcm(), data=b"sealed by the HSM", auth_additional_data=aad
    )
    with kmip_server.tls(OWNER) as raw:
        raw.sendall(request_message([(enums.Operation.ENCRYPT, encrypt)], (1, 4)))
        sealed = read_response(raw).batch_items[0].response_payload
        iv = bytes(sealed.iv_counter_nonce)  # the server's nonce
        assert len(iv) == 12 and len(sealed.auth_tag) == 16
        answers = []
        for given_aad, tag in ((aad, sealed.auth_tag), (b"other", sealed.auth_tag), (aad, bytes(16))):
            decrypt = payloads.DecryptRequestPayload(
                unique_identifier=uid,
                cryptographic_parameters=_gcm(),
                data=sealed.data,
                iv_counter_nonce=iv,
                auth_additional_data=given_aad,
                auth_tag=tag,
            )
            raw.sendall(request_message([(enums.Operation.DECRYPT, decrypt)], (1, 4)))
            answers.append(read_response(raw).batch_items[0])
    assert answers[0].response_payload.data == b"sealed by the HSM"
    for failed in answers[1:]:
        assert failed.result_reason.value == enums.ResultReason.CRYPTOGRAPHIC_FAILURE


def _gcm() -> attributes.CryptographicParameters:
    return attributes.CryptographicParameters(
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES,
        block_cipher_mode=enums.BlockCipherMode.GCM,
        tag_length=16,
    )


def test_a_batch_answers_each_item_and_stops_at_a_failure(kmip_server: KmipServer) -> None:
    created_then_activated = request_message(
        [(enums.Operation.CREATE, _create_payload()), (enums.Operation.ACTIVATE, payloads.ActivateRequestPayload())]
    )
    refused_in_the_middle = request_message(
        [
            (enums.Operation.CREATE, _create_payload(160)),
            (enums.Operation.DISCOVER_VERSIONS, payloads.DiscoverVersionsRequestPayload()),
        ]
    )
    continued = request_message(
        [
            (enums.Operation.CREATE, _create_payload(200)),
            (enums.Operation.DISCOVER_VERSIONS, payloads.DiscoverVersionsRequestPayload()),
        ],
        continue_on_error=True,
    )
    with kmip_server.tls(OWNER) as raw:
        raw.sendall(created_then_activated)
        first = read_response(raw)
        raw.sendall(refused_in_the_middle)
        second = read_response(raw)
        raw.sendall(continued)
        third = read_response(raw)
    assert [item.result_status.value for item in first.batch_items] == [enums.ResultStatus.SUCCESS] * 2, [
        getattr(item.result_message, "value", None) for item in first.batch_items
    ]
    assert [item.unique_batch_item_id.value for item in first.batch_items] == [b"0", b"1"]
    created, activated = (item.response_payload.unique_identifier for item in first.batch_items)
    assert created == activated.value
    assert len(second.batch_items) == 1
    refused = second.batch_items[0]
    assert refused.result_reason.value == enums.ResultReason.INVALID_FIELD
    assert "AES-160" in refused.result_message.value
    assert [item.result_status.value for item in third.batch_items] == [
        enums.ResultStatus.OPERATION_FAILED,
        enums.ResultStatus.SUCCESS,
    ]


def test_an_operation_not_offered_is_answered_so(kmip_server: KmipServer) -> None:
    with kmip_server.tls(OWNER) as raw:
        raw.sendall(request_message([(enums.Operation.CHECK, payloads.CheckRequestPayload(unique_identifier="x"))]))
        item = read_response(raw).batch_items[0]
    assert item.result_reason.value == enums.ResultReason.OPERATION_NOT_SUPPORTED
    assert item.operation.value == enums.Operation.CHECK


def test_refusals_are_audited_with_their_reason(kmip_server: KmipServer) -> None:
    with kmip_server.connected(AUDITOR) as auditor, pytest.raises(KmipOperationFailure) as refused:
        auditor.create(enums.CryptographicAlgorithm.AES, 256)
    assert refused.value.reason == enums.ResultReason.PERMISSION_DENIED
    records = [r for r in kmip_server.audit("kmip.Create") if r["principal"] == AUDITOR]
    assert records and records[-1]["outcome"] == "denied"
    assert records[-1]["details"]["error"] == "PERMISSION_DENIED"


_DISCOVER = request_message([(enums.Operation.DISCOVER_VERSIONS, payloads.DiscoverVersionsRequestPayload())])


def _answered(response: Any) -> bool:
    return [item.result_status.value for item in response.batch_items] == [enums.ResultStatus.SUCCESS]


def test_messages_sent_together_are_each_answered_in_turn(kmip_server: KmipServer) -> None:
    """Three messages in one write (read ahead while the first is answered), then one in pieces that
    split its header: four answers, the connection still open."""
    with kmip_server.tls(OWNER) as raw:
        raw.sendall(_DISCOVER * 3)
        together = [read_response(raw) for _ in range(3)]
        for piece in (_DISCOVER[:3], _DISCOVER[3:11], _DISCOVER[11:]):
            raw.sendall(piece)
            time.sleep(0.05)
        apart = read_response(raw)
        raw.sendall(_DISCOVER)
        assert _answered(read_response(raw))
    assert all(_answered(response) for response in [*together, apart])


def test_a_bad_header_behind_a_good_message_is_answered_then_closed(kmip_server: KmipServer) -> None:
    with kmip_server.tls(OWNER) as raw:
        raw.sendall(_DISCOVER + b"\x42\x00\x7b\x01" + bytes(4))  # a response message's header
        assert _answered(read_response(raw))
        assert closed(raw)


def test_a_client_that_stops_reading_is_closed_at_the_write_deadline(kmip_server: KmipServer) -> None:
    """Encrypts of 64 KiB sent without reading a single answer: the answers fill the buffers, the
    server stops reading, and closes the connection once an answer waited its header deadline."""
    with kmip_server.connected(OWNER) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, 256)
        client.activate(uid)
    encrypt = request_message(
        [(enums.Operation.ENCRYPT, payloads.EncryptRequestPayload(unique_identifier=uid, data=bytes(60_000)))]
    )
    timed_out = _refusals(kmip_server, "kmip_timeout")
    with kmip_server.tls(OWNER) as raw:
        raw.settimeout(30)
        closed_by_server = False
        for _ in range(2_000):  # ~120 MB: far more than any buffer on the way holds
            try:
                raw.sendall(encrypt)
            except (ConnectionError, ssl.SSLError):
                closed_by_server = True
                break
        assert closed_by_server
    assert _refusals(kmip_server, "kmip_timeout") == timed_out + 1


def _refusals(kmip_server: KmipServer, reason: str) -> float:
    """``km_connections_refused_total`` of ``reason``, as an admin reads it."""
    with kmip_server.admin() as admin:
        text = admin.get("/metrics").text
    label = f'reason="{reason}"'
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("km_connections_refused_total") and label in line
    )
