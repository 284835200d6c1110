"""Bad input on the KMIP port: no client certificate or one of another CA (refused at the
handshake), a certificate bound to no principal, malformed TTLV (lengths that disagree, beyond
the message, too deep, unknown tags and types, truncated), slow senders — each answered with a
KMIP error or the connection closed, within the header deadline (2 s here), and audited with
bounded details."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import pytest
from kmip import enums
from kmip.core.messages import payloads

from tests.kmip.server_fixtures import (
    OWNER,
    KmipServer,
    closed,
    foreign_certificate,
    kmip_server,
    read_response,
    request_message,
    unbound,
)

__all__ = ["kmip_server"]

DISCOVER = request_message([(enums.Operation.DISCOVER_VERSIONS, payloads.DiscoverVersionsRequestPayload())])


def _item(tag: int, kind: int, value: bytes, length: int | None = None) -> bytes:
    size = len(value) if length is None else length
    return tag.to_bytes(3, "big") + bytes([kind]) + size.to_bytes(4, "big") + value + bytes(-len(value) % 8)


def _structure(tag: int, *items: bytes, length: int | None = None) -> bytes:
    return _item(tag, 0x01, b"".join(items), length)


def _header(major: int = 1, minor: int = 2, count: int = 1) -> bytes:
    version = _structure(
        0x420069,
        _item(0x42006A, 0x02, major.to_bytes(4, "big")),
        _item(0x42006B, 0x02, minor.to_bytes(4, "big")),
    )
    return _structure(0x420077, version, _item(0x42000D, 0x02, count.to_bytes(4, "big")))


def _message(*items: bytes, length: int | None = None) -> bytes:
    return _structure(0x420078, *items, length=length)


def _nested(depth: int) -> bytes:
    inner = _item(0x420094, 0x07, b"x")
    for _ in range(depth):
        inner = _structure(0x420079, inner)
    return inner


MALFORMED = {
    "inner length past its parent": _message(
        _header(), _structure(0x42000F, _item(0x42005C, 0x05, bytes(4)), length=64)
    ),
    "unknown tag": _message(_header(), _structure(0x42000F, _item(0x990001, 0x05, bytes(4)))),
    "unknown type": _message(_header(), _structure(0x42000F, _item(0x42005C, 0x0F, bytes(4)))),
    "fixed size wrong": _message(_header(), _structure(0x42000F, _item(0x42005C, 0x05, bytes(8)))),
    "too deep": _message(_header(), _structure(0x42000F, _item(0x42005C, 0x05, (10).to_bytes(4, "big")), _nested(40))),
    "batch count wrong": _message(
        _header(count=3), _structure(0x42000F, _item(0x42005C, 0x05, (30).to_bytes(4, "big")))
    ),
    "no header": _message(_structure(0x42000F, _item(0x42005C, 0x05, (30).to_bytes(4, "big")))),
    "version not served": _message(_header(3, 0), _structure(0x42000F, _item(0x42005C, 0x05, (30).to_bytes(4, "big")))),
}


@pytest.mark.parametrize("why", sorted(MALFORMED))
def test_malformed_ttlv_is_answered_invalid_message_and_audited(kmip_server: KmipServer, why: str) -> None:
    with kmip_server.tls(OWNER) as connection:
        connection.sendall(MALFORMED[why])
        item = read_response(connection).batch_items[0]
        assert item.result_status.value == enums.ResultStatus.OPERATION_FAILED
        assert item.result_reason.value == enums.ResultReason.INVALID_MESSAGE
        connection.sendall(DISCOVER)  # the connection still serves
        assert read_response(connection).batch_items[0].result_status.value == enums.ResultStatus.SUCCESS
    record = kmip_server.audit("kmip.message")[-1]
    assert record["principal"] == OWNER and record["details"]["error"] == "INVALID_MESSAGE"
    assert len(str(record["details"])) < 1024


@pytest.mark.parametrize(
    "start",
    [
        (0x420078).to_bytes(3, "big") + b"\x01" + (64 * 1024 * 1024).to_bytes(4, "big"),  # over the limit
        (0x420078).to_bytes(3, "big") + b"\x01" + (13).to_bytes(4, "big"),  # not a multiple of 8
        (0x420077).to_bytes(3, "big") + b"\x01" + (16).to_bytes(4, "big"),  # not a request message
        b"GET / HTTP/1.1\r\n",
    ],
    ids=["over-the-limit", "unaligned", "not-a-request", "http"],
)
def test_a_bad_message_header_closes_the_connection(kmip_server: KmipServer, start: bytes) -> None:
    with kmip_server.tls(OWNER) as connection:
        connection.sendall(start)
        assert closed(connection)


def test_a_message_that_stops_short_is_closed_at_the_deadline(kmip_server: KmipServer) -> None:
    """Its length says more than comes (beyond the message, or truncated): closed at the header deadline."""
    with kmip_server.tls(OWNER) as connection:
        connection.sendall(DISCOVER[:-8])
        assert closed(connection)


def test_a_slow_sender_is_closed_at_the_deadline(kmip_server: KmipServer) -> None:
    with kmip_server.tls(OWNER) as connection:
        refused = False
        for byte in DISCOVER:  # one byte every 0.2 s: the whole message would take 20 s
            try:
                connection.sendall(bytes([byte]))
            except (ConnectionError, ssl.SSLError):
                refused = True
                break
            time.sleep(0.2)
            connection.settimeout(0.01)
            try:
                if connection.recv(1) == b"":
                    refused = True
                    break
            except TimeoutError:
                continue
            except (ConnectionError, ssl.SSLError):
                refused = True
                break
        assert refused


def test_a_connection_without_a_client_certificate_is_refused_at_the_handshake(kmip_server: KmipServer) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)), kmip_server.tls(None) as connection:
        connection.sendall(DISCOVER)
        read_response(connection)


def test_a_certificate_of_another_ca_is_refused_at_the_handshake(kmip_server: KmipServer, tmp_path: Path) -> None:
    cert, key = foreign_certificate(tmp_path)
    context = ssl.create_default_context(cafile=str(kmip_server.server.ca))
    context.check_hostname = False
    context.load_cert_chain(str(cert), str(key))
    raw = socket.create_connection(("127.0.0.1", kmip_server.port), timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError)), context.wrap_socket(raw) as connection:
        connection.sendall(DISCOVER)
        read_response(connection)


def test_a_certificate_bound_to_no_principal_is_refused_and_summarised(kmip_server: KmipServer) -> None:
    with unbound(kmip_server, "kmip-nobody").tls("kmip-nobody") as connection:
        connection.sendall(DISCOVER)
        item = read_response(connection).batch_items[0]
        assert item.result_reason.value == enums.ResultReason.AUTHENTICATION_NOT_SUCCESSFUL
        assert closed(connection)
