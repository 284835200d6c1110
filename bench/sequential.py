"""One SDK client, one call at a time: the latency of re-encryption, data keys and MACs.

The calls run in this process, on one keep-alive connection, for ``--duration`` seconds after
``--warmup`` (or ``--requests`` calls). Every answer is checked, untimed: a re-encryption's
ciphertext is decrypted and compared with the plaintext, a data key must be 32 bytes with its
wrapped form, a MAC must equal the first one made of the same message.
"""

from __future__ import annotations

import os
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from keymanager_sdk import DataKey, KeyManager, Mac, Policy

from bench.measure import Measurement, Window
from bench.probes import ServerProbe, cpu_seconds
from bench.service import Endpoint, Service

OPERATIONS = ("reencrypt", "generate_data_key", "mac")


def mac_endpoint(service: Service, endpoint: Endpoint) -> Endpoint:
    """The endpoint with an ``HMAC_SHA256`` key the principal may MAC with, made here."""
    assert endpoint.principal is not None
    name = f"bench-mac-{secrets.token_hex(4)}"
    with KeyManager(service.url, token=service.admin_token, ca=service.ca) as admin:
        admin.create_key(name, algorithm="HMAC_SHA256", policy=Policy(mac=(endpoint.principal,)))
    return replace(endpoint, key=name)


Call = tuple[Callable[[], object], Callable[[object], bool]]
"""An operation and the check of its answer."""


def calls(km: KeyManager, endpoint: Endpoint, mac_key: str, size: int) -> dict[str, Call]:
    """Each operation with the (untimed) check of its answer."""
    plaintext = os.urandom(size)
    sealed = km.encrypt(endpoint.key, plaintext)
    first_mac = km.mac(mac_key, plaintext).mac

    def reencrypted(answer: object) -> bool:
        return km.decrypt(str(answer)) == plaintext

    def data_key(answer: object) -> bool:
        return isinstance(answer, DataKey) and len(answer.plaintext or b"") == 32 and bool(answer.ciphertext)

    def mac(answer: object) -> bool:
        return isinstance(answer, Mac) and answer.mac == first_mac

    return {
        "reencrypt": (lambda: km.reencrypt(endpoint.key, sealed), reencrypted),
        "generate_data_key": (lambda: km.generate_data_key(endpoint.key), data_key),
        "mac": (lambda: km.mac(mac_key, plaintext), mac),
    }


def measure_sequential(name: str, call: Call, size: int, window: Window, probe: ServerProbe) -> Measurement:
    """Warm up, then time the operation one call after the other; its checks are not timed."""
    operation, check = call
    errors: Counter[str] = Counter()
    end = time.monotonic() + window.warmup
    while time.monotonic() < end:
        operation()
    latencies: list[float] = []
    attempts = 0
    cpu_before = cpu_seconds(probe.pids()) if probe.known else None
    started = time.perf_counter()
    end = time.monotonic() + (window.duration or 0.0)
    while not attempts or (time.monotonic() < end if window.requests is None else attempts < window.requests):
        attempts += 1
        began = time.perf_counter()
        try:
            answer = operation()
        except Exception as exc:
            errors[type(exc).__name__] += 1
            continue
        latencies.append(time.perf_counter() - began)
        if not check(answer):
            errors["mismatch"] += 1
    elapsed = time.perf_counter() - started
    cpu = None if cpu_before is None else cpu_seconds(probe.pids()) - cpu_before
    return Measurement(
        target="km",
        label=f"keymanager SDK {name}, one client",
        size=size,
        concurrency=1,
        mode=name,
        repeat=0,
        items=1,
        elapsed=elapsed,
        encrypt=latencies,
        decrypt=[],
        errors=dict(errors),
        checked=len(latencies),
        client_cpu_s=0.0,
        client_procs=1,
        server_cpu_s=cpu,
    )
