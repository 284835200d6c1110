"""Work run in a child process by the HSM multi-process tests (free of the fixtures' imports)."""

from __future__ import annotations

from typing import Any

from keymanager.domain.models import Algorithm
from keymanager.hsm import Hsm


def generate(module: str, label: str, pin: str, key_id: str, results: Any) -> None:
    """Generate version 1 of ``key_id`` in the token and report its labels."""
    hsm = Hsm(module, label, pin)
    try:
        results.put(hsm.generate_version(key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256))
    finally:
        hsm.close()
