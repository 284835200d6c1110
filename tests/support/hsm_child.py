"""Work run in a child process by the HSM multi-process tests (free of the fixtures' imports)."""

from __future__ import annotations

from typing import Any

from keymanager.domain import ciphertext as ct
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm
from keymanager.errors import KeyManagerError
from keymanager.hsm import Hsm, version_labels


def generate(module: str, label: str, pin: str, key_id: str, results: Any) -> None:
    """Generate version 1 of ``key_id`` in the token and report its labels."""
    hsm = Hsm(module, label, pin)
    try:
        results.put(hsm.generate_version(key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256))
    finally:
        hsm.close()


def look_up_a_missing_label(module: str, label: str, pin: str, results: Any) -> None:
    """Ask for a key version whose objects are not in the token, after a real one was used, and
    report (the module's quirks, the error's code, whether the session and the cached key copies
    survived the look-up), then destroy what was made."""
    hsm = Hsm(module, label, pin)
    try:
        objects = hsm.generate_version(new_id(), 1, Algorithm.AES_256_GCM)
        head = ct.header("0" * 32, 1)
        hsm.encrypt(objects, Algorithm.AES_256_GCM, head, b"4111", b"")  # a session and a cached copy
        session = hsm.call(lambda token: token.session())
        missing = version_labels(new_id(), 1, Algorithm.AES_256_GCM)
        try:
            hsm.encrypt(missing, Algorithm.AES_256_GCM, head, b"4111", b"")
            code = "none"
        except KeyManagerError as exc:
            code = type(exc).__name__
        kept = hsm.call(lambda token: (token.session() is session, objects.enc_label in token._keys))
        results.put((hsm._token.quirks.name, code, *kept))
        hsm.destroy_version(objects)
    finally:
        hsm.close()
