"""Strangers at a good client's address never cost it an answer on the KMIP port (a balancer, a NAT).

Against a server of its own (two workers, an authentication-failure throttle of burst 5 refilled at
half a failure a second, so a stranger spends it at once): from 127.0.0.1, four strangers connect
over and over, each connection its own, ``STRANGER_RATE`` times a second each — a TLS handshake
without a certificate, one with a certificate of another CA, TTLV bytes sent where the handshake
belongs, and a certificate of the server's CA whose subject is bound to no principal (answered
Authentication Not Successful and closed, counted by the throttle every door shares; once the
address is throttled, refused before any lookup and told so). Meanwhile,
from the same address, a client with a good certificate sends ``GOOD_REQUESTS`` Encrypt requests
each on a connection of its own (so both workers serve it, after its own handshake) and as many on
one connection kept open. Bound: every good request answered Success; every stranger refused; the
unbound certificate's failures more than both workers' buckets and refill hold (the throttle was
spent), and summed up in at most one ``auth.failed`` record per worker.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kmip import enums
from kmip.core import attributes
from kmip.core.messages import payloads

from tests.e2e.conftest import free_port, running_server
from tests.kmip.server_fixtures import (
    OWNER,
    KmipServer,
    foreign_certificate,
    read_response,
    request_message,
    unbound,
    with_principals,
)

BURST = 5
PER_SECOND = 0.5
WORKERS = 2
STRANGER_RATE = 12
GOOD_REQUESTS = 20
SPACING = 0.1
NOBODY = "kmip-nobody"
DISCOVER = request_message([(enums.Operation.DISCOVER_VERSIONS, payloads.DiscoverVersionsRequestPayload())])
NOT_BOUND = "the client certificate is bound to no principal"
RESPONSE_TAG = (0x42007B).to_bytes(3, "big")
"""How a KMIP response message starts."""


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KmipServer]:
    home = tmp_path_factory.mktemp("kmip-strangers")
    port = free_port()
    throttle = {"KM_AUTH_FAILURE_BURST": str(BURST), "KM_AUTH_FAILURES_PER_SECOND": str(PER_SECOND)}
    with running_server(home, workers=WORKERS, KM_KMIP_PORT=str(port), **throttle) as server:
        yield with_principals(server, port, home, [OWNER])


def _context(door: KmipServer, cert: tuple[Path, Path] | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(door.server.ca))
    context.check_hostname = False
    if cert is not None:
        context.load_cert_chain(*(str(p) for p in cert))
    return context


def _over_tls(door: KmipServer, context: ssl.SSLContext) -> str:
    """What a stranger presenting ``context``'s certificate (or none) gets for a DiscoverVersions."""
    try:
        raw = socket.create_connection(("127.0.0.1", door.port), timeout=10)
        with context.wrap_socket(raw) as connection:
            connection.sendall(DISCOVER)
            item = read_response(connection).batch_items[0]
            if item.result_reason is not None and (
                item.result_reason.value == enums.ResultReason.AUTHENTICATION_NOT_SUCCESSFUL
            ):
                return "refused" if connection.recv(1) == b"" else "refused, left open"
            return f"answered {item.result_status.value.name}"
    except (ssl.SSLError, ConnectionError):
        return "refused"


def _refusal_message(door: KmipServer, context: ssl.SSLContext) -> str:
    """The result message a stranger presenting ``context``'s certificate gets for a DiscoverVersions."""
    raw = socket.create_connection(("127.0.0.1", door.port), timeout=10)
    with context.wrap_socket(raw) as connection:
        connection.sendall(DISCOVER)
        return str(read_response(connection).batch_items[0].result_message.value)


def _without_tls(door: KmipServer) -> str:
    """What a stranger sending TTLV where the TLS handshake belongs gets."""
    with socket.create_connection(("127.0.0.1", door.port), timeout=10) as raw:
        try:
            raw.sendall(DISCOVER)
            reply = b""
            while chunk := raw.recv(4096):
                reply += chunk
        except ConnectionError:
            return "refused"
    return "answered" if reply.startswith(RESPONSE_TAG) else "refused"


def _flood(attempt: Callable[[], str], outcomes: list[str], stop: threading.Event) -> None:
    """``attempt`` ``STRANGER_RATE`` times a second until ``stop``, its outcomes kept."""
    start, made = time.monotonic(), 0
    while not stop.is_set():
        outcomes.append(attempt())
        made += 1
        time.sleep(max(0.0, start + made / STRANGER_RATE - time.monotonic()))


def _encrypt(uid: str) -> bytes:
    parameters = attributes.CryptographicParameters(
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES,
        block_cipher_mode=enums.BlockCipherMode.CBC,
        padding_method=enums.PaddingMethod.PKCS5,
        random_iv=True,
    )
    payload = payloads.EncryptRequestPayload(unique_identifier=uid, cryptographic_parameters=parameters, data=b"pan")
    return request_message([(enums.Operation.ENCRYPT, payload)])


def _answered(connection: ssl.SSLSocket, request: bytes) -> str:
    try:
        connection.sendall(request)
        item = read_response(connection).batch_items[0]
    except (ConnectionError, ssl.SSLError) as exc:
        return f"no answer: {type(exc).__name__}"
    if item.result_status.value == enums.ResultStatus.SUCCESS and item.response_payload.data:
        return "success"
    return f"{item.result_reason.value.name}: {item.result_message.value}"


def test_strangers_at_its_address_cost_a_good_client_no_answer(door: KmipServer, tmp_path: Path) -> None:
    with door.connected(OWNER) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, 256)
        client.activate(uid)
    request = _encrypt(uid)
    nobody = unbound(door, NOBODY)
    strangers: dict[str, Callable[[], str]] = {
        "no certificate": lambda context=_context(door, None): _over_tls(door, context),
        "another CA's": lambda context=_context(door, foreign_certificate(tmp_path)): _over_tls(door, context),
        "TTLV without TLS": lambda: _without_tls(door),
        "bound to no principal": lambda context=_context(door, nobody.certs[NOBODY]): _over_tls(door, context),
    }
    seen = {r["position"] for r in door.audit("auth.failed")}
    outcomes: dict[str, list[str]] = {name: [] for name in strangers}
    stop = threading.Event()
    floods = [threading.Thread(target=_flood, args=(strangers[name], outcomes[name], stop)) for name in strangers]
    started = time.monotonic()
    for flood in floods:
        flood.start()
    good: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while sum(map(len, outcomes.values())) < STRANGER_RATE * len(strangers):  # a second's head start:
            assert time.monotonic() < deadline, outcomes  # 127.0.0.1's buckets (5 a worker) are spent, and stay so
            time.sleep(0.05)
        with door.tls(OWNER) as kept_open:
            for _ in range(GOOD_REQUESTS):
                with door.tls(OWNER) as own:
                    good.append(_answered(own, request))
                good.append(_answered(kept_open, request))
                time.sleep(SPACING)
    finally:
        stop.set()
        for flood in floods:
            flood.join()
    flooded = time.monotonic() - started

    assert good == ["success"] * 2 * GOOD_REQUESTS, [answer for answer in good if answer != "success"]
    assert {name: set(found) for name, found in outcomes.items()} == {name: {"refused"} for name in strangers}
    spendable = WORKERS * (BURST + PER_SECOND * flooded)
    assert len(outcomes["bound to no principal"]) > spendable, (len(outcomes["bound to no principal"]), flooded)
    summaries = [r for r in door.audit("auth.failed") if r["position"] not in seen]
    assert 1 <= len(summaries) <= WORKERS, summaries
    # The address is throttled (a worker's refill may have left one failure to spend): its stranger
    # is refused before any lookup, and told why.
    unbound_context = _context(door, nobody.certs[NOBODY])
    messages = [_refusal_message(door, unbound_context) for _ in range(2 * WORKERS + 2)]
    assert set(messages) <= {"too many failed authentications from this address", NOT_BOUND}, messages
    assert "too many failed authentications from this address" in messages, messages
