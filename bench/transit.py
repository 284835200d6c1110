"""keymanager's Vault Transit door against native REST encrypt: the same key (the KMS door's
``AES_256_GCM`` key, ``bench.kmsdoor.provision_door``), the same plaintext, the same principal's token,
the same driver (wrk replaying one request) and connections; the service's CPU per answered request of
each (``targets``: Transit's share of native ops/s, and its CPU per request against native's)."""

from __future__ import annotations

import base64
import json

from bench import wrk
from bench.measure import Measurement, Window
from bench.probes import ServerProbe
from bench.service import Endpoint

MOUNT = "transit"


def transit_encrypt(endpoint: Endpoint, key: str, plaintext: bytes) -> str:
    """The wrk script of Transit's ``encrypt/<key>`` of ``plaintext``, as Vault's clients send it."""
    body = json.dumps({"plaintext": base64.b64encode(plaintext).decode()})
    headers = {"Content-Type": "application/json", "X-Vault-Token": str(endpoint.token)}
    return wrk.lua(f"/v1/{MOUNT}/encrypt/{key}", body, headers)


def transit_encrypt_wrk(
    endpoint: Endpoint, key: str, plaintext: bytes, connections: int, window: Window, probe: ServerProbe
) -> Measurement:
    """wrk replaying one Transit encrypt (warm-up, then measured)."""
    script = transit_encrypt(endpoint, key, plaintext)
    warm = script if window.warmup >= 0.5 else None
    run = wrk.Run("km-transit", "keymanager Transit encrypt [wrk]", len(plaintext), connections)
    return wrk.measure_lua(endpoint.url, script, warm, run, window, probe)
