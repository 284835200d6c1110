"""Whose word on the client's address is taken: :class:`ProxyTrust` (``KM_TRUSTED_PROXIES``,
``KM_PROXY_PROTOCOL``, ``KM_FORWARDED_HEADER``).

The address a request is known by — in its audit record, its log lines, the failed-authentication
throttle's bucket, the metrics — is the TCP peer's, unless the peer is a trusted balancer:

* with ``KM_PROXY_PROTOCOL`` (the default), a trusted peer must begin each connection with a
  PROXY header (``serving/proxy_header.py``), which names the client; a peer that is not trusted
  must not send one. Both are refused otherwise (``serving/front.py``). Forwarding headers are
  never read in this mode: the PROXY header is the balancer's whole word, and a client it names
  (even one inside ``KM_TRUSTED_PROXIES``) speaks only for itself;
* with ``KM_PROXY_PROTOCOL=false`` (a balancer that terminates TLS), a request whose peer is
  trusted is known by the client that the one header ``KM_FORWARDED_HEADER`` names
  (``x-forwarded-for``, the default, or RFC 7239 ``forwarded``'s ``for=``): the rightmost address
  that is not itself a trusted proxy (the ones to its left are the client's to invent). The other
  header is never read: a client's own ``Forwarded`` cannot outvote the ``X-Forwarded-For`` its
  balancer appends to, nor the reverse.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from keymanager.config import Settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_HOPS = 32
"""Forwarding hops read from the right at most; the rest cannot be told from the client's invention."""


X_FORWARDED_FOR = "x-forwarded-for"
FORWARDED = "forwarded"


@dataclass(frozen=True)
class ProxyTrust:
    """The trusted balancers' networks, whether they speak the PROXY protocol, and which forwarding
    header names the client when they do not."""

    networks: tuple[Network, ...]
    proxy_protocol: bool
    forwarded_header: str = X_FORWARDED_FOR
    """``x-forwarded-for`` or ``forwarded`` (lower case): the only header read, without the PROXY protocol."""

    def trusts(self, host: str) -> bool:
        """Whether ``host`` (an address as text) is in a trusted network."""
        if not self.networks:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)

    def expects_header(self, host: str) -> bool:
        """Whether a connection from ``host`` must begin with a PROXY header."""
        return self.proxy_protocol and self.trusts(host)

    def forwarded_client(self, peer: str, headers: Sequence[tuple[bytes, bytes]]) -> str:
        """The client a request from ``peer`` is known by (``headers``: names in lower case): ``peer``
        itself in PROXY mode (it is the client the PROXY header named) or when it is not trusted;
        else the rightmost untrusted hop of the configured forwarding header."""
        if self.proxy_protocol or not self.trusts(peer):
            return peer
        hops = _forwarded_for(headers) if self.forwarded_header == FORWARDED else _x_forwarded_for(headers)
        client = peer
        for hop in reversed(hops[-MAX_HOPS:]):
            if hop is None:  # not an address: nothing to its left can be told from an invention
                return client
            client = hop
            if not self.trusts(hop):
                return hop
        return client


@functools.cache
def proxy_trust() -> ProxyTrust:
    """This process's trust, from its settings (read once: every worker reads its own)."""
    settings = Settings()
    return ProxyTrust(tuple(settings.trusted_proxies), settings.proxy_protocol, settings.forwarded_header)


def _x_forwarded_for(headers: Sequence[tuple[bytes, bytes]]) -> list[str | None]:
    values = b",".join(value for name, value in headers if name == b"x-forwarded-for")
    return [_address(part) for part in values.decode("latin-1").split(",")] if values else []


def _forwarded_for(headers: Sequence[tuple[bytes, bytes]]) -> list[str | None]:
    values = b",".join(value for name, value in headers if name == b"forwarded")
    if not values:
        return []
    hops: list[str | None] = []
    for element in values.decode("latin-1").split(","):
        pairs = (pair.strip().partition("=") for pair in element.split(";"))
        found = [value for name, _, value in pairs if name.lower() == "for"]
        hops.append(_address(found[0].strip('"')) if found else None)
    return hops


def _address(text: str) -> str | None:
    """The address of a hop (``1.2.3.4``, ``1.2.3.4:80``, ``[::1]``, ``[::1]:80``, ``::1``); None if none."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None
