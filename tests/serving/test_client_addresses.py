"""The PROXY header (v1 and v2, as HAProxy sends them and as an attacker might), whose forwarding
headers are believed, and the bounded log of refused connections."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import struct
from dataclasses import replace

import pytest
from pydantic import ValidationError

from keymanager.config import Settings
from keymanager.serving.client_address import ProxyTrust
from keymanager.serving.proxy_header import (
    MAX_HEADER_BYTES,
    V2_SIGNATURE,
    MalformedProxyHeader,
    ProxyHeader,
    may_begin_header,
    parse,
)
from keymanager.serving.refusals import ConnectionRefusals

TLS_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"


def v2(command: int, family: int, addresses: bytes, tlvs: bytes = b"") -> bytes:
    body = addresses + tlvs
    return V2_SIGNATURE + bytes([command, family]) + struct.pack("!H", len(body)) + body


def v2_tcp4(source: str, port: int) -> bytes:
    return v2(0x21, 0x11, socket.inet_aton(source) + socket.inet_aton("10.0.0.1") + struct.pack("!HH", port, 8443))


def test_v1_headers_name_the_client_and_their_length() -> None:
    header = b"PROXY TCP4 203.0.113.7 10.0.0.1 51000 8443\r\n"
    assert parse(header + TLS_HELLO) == ProxyHeader(("203.0.113.7", 51000), len(header))
    six = b"PROXY TCP6 2001:db8::7 2001:db8::1 4711 8443\r\n"
    assert parse(six) == ProxyHeader(("2001:db8::7", 4711), len(six))
    assert parse(b"PROXY UNKNOWN\r\n") == ProxyHeader(None, 15)


def test_v2_headers_name_the_client_and_their_length() -> None:
    header = v2_tcp4("203.0.113.8", 52000)
    assert parse(header + TLS_HELLO) == ProxyHeader(("203.0.113.8", 52000), 28)
    addresses = ipaddress.IPv6Address("2001:db8::8").packed + ipaddress.IPv6Address("2001:db8::1").packed
    six = v2(0x21, 0x21, addresses + struct.pack("!HH", 4712, 8443), tlvs=b"\x04\x00\x01\x00")  # a NOOP TLV
    assert parse(six) == ProxyHeader(("2001:db8::8", 4712), len(six))
    assert parse(v2(0x20, 0x00, b"")) == ProxyHeader(None, 16)  # LOCAL: the balancer's health check


@pytest.mark.parametrize(
    "truncated", [b"", b"PRO", b"PROXY TCP4 203.0.113.7", V2_SIGNATURE[:5], v2_tcp4("203.0.113.8", 1)[:20]]
)
def test_a_beginning_waits_for_more(truncated: bytes) -> None:
    assert parse(truncated) is None


@pytest.mark.parametrize(
    "malformed",
    [
        TLS_HELLO,  # no header at all
        b"GET / HTTP/1.1\r\n",
        b"PROXY TCP4 999.0.113.7 10.0.0.1 1 2\r\n",
        b"PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n",
        b"PROXY TCP4 203.0.113.7 10.0.0.1 65536 2\r\n",
        b"PROXY TCP4 203.0.113.7 10.0.0.1 +1 2\r\n",
        b"PROXY TCP4 203.0.113.7 10.0.0.1 1\r\n",
        b"PROXY UDP4 203.0.113.7 10.0.0.1 1 2\r\n",
        b"PROXY " + b"1" * 200,  # no end within 107 bytes
        v2(0x22, 0x11, b"\x00" * 12),  # an unknown command
        v2(0x21, 0x11, b"\x00" * 4),  # too short for its addresses
        v2(0x21, 0x12, b"\x00" * 12),  # UDP
        V2_SIGNATURE + b"\x21\x11\xff\xff",  # announces 64 KiB
    ],
)
def test_malformed_or_oversized_headers_are_refused(malformed: bytes) -> None:
    with pytest.raises(MalformedProxyHeader):
        parse(malformed)


def test_a_v2_header_is_bounded_even_before_it_arrives() -> None:
    announced = V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", MAX_HEADER_BYTES - 15)
    with pytest.raises(MalformedProxyHeader):
        parse(announced)
    assert parse(V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", MAX_HEADER_BYTES - 16)) is None


def test_a_header_is_told_from_tls_and_http_in_its_first_bytes() -> None:
    assert may_begin_header(TLS_HELLO) is False
    assert may_begin_header(b"POST / HTTP/1.1") is False
    assert may_begin_header(b"P") is None and may_begin_header(b"\r\n") is None
    assert may_begin_header(b"PROXY TCP4") is True and may_begin_header(V2_SIGNATURE) is True


TRUST = ProxyTrust((ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")), proxy_protocol=False)


def test_forwarding_headers_are_believed_from_trusted_proxies_only() -> None:
    headers = [(b"x-forwarded-for", b"198.51.100.1, 203.0.113.7")]
    assert TRUST.forwarded_client("10.1.2.3", headers) == "203.0.113.7"
    assert TRUST.forwarded_client("192.0.2.1", headers) == "192.0.2.1"
    assert TRUST.forwarded_client("::ffff:10.1.2.3", headers) == "203.0.113.7"  # IPv4-mapped
    assert ProxyTrust((), proxy_protocol=False).forwarded_client("10.1.2.3", headers) == "10.1.2.3"


def test_the_rightmost_untrusted_hop_is_the_client() -> None:
    chain = [(b"x-forwarded-for", b"6.6.6.6, 203.0.113.7"), (b"x-forwarded-for", b"10.9.9.9")]
    assert TRUST.forwarded_client("10.1.2.3", chain) == "203.0.113.7"  # the client's own 6.6.6.6 is ignored
    assert TRUST.forwarded_client("10.1.2.3", [(b"x-forwarded-for", b"10.5.5.5")]) == "10.5.5.5"
    assert TRUST.forwarded_client("10.1.2.3", [(b"x-forwarded-for", b"6.6.6.6, junk")]) == "10.1.2.3"
    assert TRUST.forwarded_client("10.1.2.3", [(b"x-forwarded-for", b"203.0.113.7:443")]) == "203.0.113.7"


BOTH = [(b"x-forwarded-for", b"203.0.113.7"), (b"forwarded", b"for=6.6.6.8")]
"""What a balancer appending to ``X-Forwarded-For`` passes on when its client sent ``Forwarded`` itself."""


def test_only_the_configured_header_is_read_never_both() -> None:
    assert TRUST.forwarded_client("10.1.2.3", BOTH) == "203.0.113.7"  # the default: x-forwarded-for
    assert TRUST.forwarded_client("10.1.2.3", [(b"forwarded", b"for=6.6.6.8")]) == "10.1.2.3"
    by_forwarded = replace(TRUST, forwarded_header="forwarded")
    assert by_forwarded.forwarded_client("10.1.2.3", BOTH) == "6.6.6.8"
    assert by_forwarded.forwarded_client("10.1.2.3", [(b"x-forwarded-for", b"203.0.113.7")]) == "10.1.2.3"


def test_the_rightmost_untrusted_hop_of_forwarded_is_the_client() -> None:
    trust = replace(TRUST, forwarded_header="forwarded")
    headers = [(b"forwarded", b'for=6.6.6.6, for="[2001:db8::7]:4711";proto=https')]
    assert trust.forwarded_client("10.1.2.3", headers) == "2001:db8::7"
    assert trust.forwarded_client("10.1.2.3", [(b"forwarded", b"for=unknown")]) == "10.1.2.3"
    assert trust.forwarded_client("10.1.2.3", [(b"forwarded", b"by=10.0.0.1;for=203.0.113.7")]) == "203.0.113.7"
    split = [(b"forwarded", b"for=6.6.6.6"), (b"forwarded", b"for=203.0.113.9, for=10.2.2.2")]
    assert trust.forwarded_client("10.1.2.3", split) == "203.0.113.9"


def test_in_proxy_mode_no_forwarding_header_is_read() -> None:
    """The PROXY header named the peer: even an address inside the trusted networks speaks for itself."""
    proxied = replace(TRUST, proxy_protocol=True)
    assert proxied.forwarded_client("10.1.2.3", [(b"x-forwarded-for", b"6.6.6.9")]) == "10.1.2.3"
    assert replace(proxied, forwarded_header="forwarded").forwarded_client("10.1.2.3", BOTH) == "10.1.2.3"


def test_the_forwarded_header_setting_takes_either_name_in_any_case() -> None:
    assert Settings(forwarded_header="X-Forwarded-For").forwarded_header == "x-forwarded-for"
    assert Settings(forwarded_header="Forwarded").forwarded_header == "forwarded"
    assert Settings().forwarded_header == "x-forwarded-for"
    with pytest.raises(ValidationError):
        Settings(forwarded_header="x-real-ip")


def test_only_trusted_peers_must_send_a_proxy_header() -> None:
    required = ProxyTrust((ipaddress.ip_network("10.0.0.0/8"),), proxy_protocol=True)
    assert required.expects_header("10.1.2.3") and not required.expects_header("192.0.2.1")
    assert not TRUST.expects_header("10.1.2.3")


def test_hundreds_of_refusals_from_one_address_log_a_bounded_number_of_lines(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    counted: list[str] = []
    refusals = ConnectionRefusals(interval=60, max_addresses=2, clock=lambda: now[0])
    refusals.observer = counted.append

    async def storm() -> None:
        for n in range(500):
            refusals.refused("203.0.113.7", "bad_request" if n % 2 else "head_too_large")
        now[0] = 61.0
        refusals.flush()
        for address in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):  # the first one is evicted
            refusals.refused(address, "tls")
            refusals.refused(address, "tls")
        refusals.flush(everything=True)

    with caplog.at_level(logging.WARNING, logger="keymanager.serving.refusals"):
        asyncio.run(storm())
    lines = [r.getMessage() for r in caplog.records]
    assert len(counted) == 506
    assert len(lines) == 1 + 1 + 3 + 3, lines  # first + summary of 203.0.113.7; per other address first + sum
    assert "499 more connections from 203.0.113.7 refused" in lines[1]
    assert "250 400: not valid HTTP" in lines[1] and "249 431" in lines[1]
    assert len(refusals) == 2
