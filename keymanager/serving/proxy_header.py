"""The PROXY protocol header (HAProxy's, versions 1 and 2): how a balancer that passes TLS through
names the client in front of the TLS handshake.

:func:`parse` reads the header at the start of a connection's first bytes: the client's address
and the header's length, None while it may still be incomplete, :class:`MalformedProxyHeader`
for anything else — never more than :data:`MAX_HEADER_BYTES` looked at. Specification:
https://www.haproxy.org/download/2.8/doc/proxy-protocol.txt
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

V1_PREFIX = b"PROXY "
V1_MAX_BYTES = 107
"""A version 1 header, ``\\r\\n`` included, is at most this long (the specification's bound)."""
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V2_FIXED_BYTES = 16
MAX_HEADER_BYTES = 4096
"""A version 2 header with its addresses and TLVs may be at most this long (HAProxy's
``send-proxy-v2`` sends 28 bytes for IPv4, 52 for IPv6)."""
_V2_PROXY, _V2_LOCAL = 0x21, 0x20
_V2_TCP4, _V2_TCP6 = 0x11, 0x21
_V2_UNSPEC_OR_UNIX = frozenset({0x00, 0x31, 0x32})


class MalformedProxyHeader(Exception):
    """The bytes are not a PROXY header this service accepts (the connection is refused)."""


@dataclass(frozen=True)
class ProxyHeader:
    """A parsed header: the client's address and port (None: the balancer's own connection, a
    health check — ``LOCAL`` or ``UNKNOWN``), and how many bytes of the stream it took."""

    source: tuple[str, int] | None
    length: int


def parse(data: bytes) -> ProxyHeader | None:
    """The PROXY header at the start of ``data``; None when ``data`` is a proper beginning of one
    (wait for more); :class:`MalformedProxyHeader` otherwise."""
    if data.startswith(V2_SIGNATURE):
        return _parse_v2(data)
    if data.startswith(V1_PREFIX):
        return _parse_v1(data)
    if V2_SIGNATURE.startswith(data) or V1_PREFIX.startswith(data):
        return None
    raise MalformedProxyHeader("the connection does not begin with a PROXY header")


def may_begin_header(data: bytes) -> bool | None:
    """Whether ``data`` begins a PROXY header (True), cannot (False), or may (None: too short to tell)."""
    for signature in (V1_PREFIX, V2_SIGNATURE):
        if data.startswith(signature):
            return True
        if signature.startswith(data):
            return None
    return False


def _parse_v1(data: bytes) -> ProxyHeader | None:
    end = data.find(b"\r\n", 0, V1_MAX_BYTES)
    if end < 0:
        if len(data) >= V1_MAX_BYTES:
            raise MalformedProxyHeader("a PROXY v1 header longer than 107 bytes")
        return None
    parts = data[:end].split(b" ")
    if len(parts) >= 2 and parts[1] == b"UNKNOWN":
        return ProxyHeader(None, end + 2)
    if len(parts) != 6 or parts[1] not in (b"TCP4", b"TCP6"):
        raise MalformedProxyHeader("a PROXY v1 header is PROXY TCP4|TCP6 <source> <destination> <ports>")
    version = 4 if parts[1] == b"TCP4" else 6
    source = _address(parts[2], version)
    _address(parts[3], version)
    port = _port(parts[4])
    _port(parts[5])
    return ProxyHeader((source, port), end + 2)


def _parse_v2(data: bytes) -> ProxyHeader | None:
    if len(data) < V2_FIXED_BYTES:
        return None
    command, family = data[12], data[13]
    length = V2_FIXED_BYTES + int.from_bytes(data[14:16], "big")
    if command not in (_V2_PROXY, _V2_LOCAL):
        raise MalformedProxyHeader("a PROXY v2 header of another version or command")
    if length > MAX_HEADER_BYTES:
        raise MalformedProxyHeader(f"a PROXY v2 header longer than {MAX_HEADER_BYTES} bytes")
    if len(data) < length:
        return None
    if command == _V2_LOCAL or family in _V2_UNSPEC_OR_UNIX:
        return ProxyHeader(None, length)
    body = data[V2_FIXED_BYTES:length]
    if family == _V2_TCP4 and len(body) >= 12:
        return ProxyHeader((str(ipaddress.IPv4Address(body[0:4])), int.from_bytes(body[8:10], "big")), length)
    if family == _V2_TCP6 and len(body) >= 36:
        return ProxyHeader((str(ipaddress.IPv6Address(body[0:16])), int.from_bytes(body[32:34], "big")), length)
    raise MalformedProxyHeader("a PROXY v2 header of another family or too short for its addresses")


def _address(text: bytes, version: int) -> str:
    try:
        address = ipaddress.ip_address(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise MalformedProxyHeader("a PROXY v1 header with an address that is not one") from None
    if address.version != version:
        raise MalformedProxyHeader("a PROXY v1 header whose address is not of its family")
    return str(address)


def _port(text: bytes) -> int:
    if not text.isdigit() or len(text) > 5 or int(text) > 65535 or (len(text) > 1 and text.startswith(b"0")):
        raise MalformedProxyHeader("a PROXY v1 header with a port that is not one")
    return int(text)
