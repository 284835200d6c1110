"""Objects made by another process are usable here, even after this process wrote to the token.

SoftHSM hides another process's new objects from a process that has written to the token
since; the adapter re-initialises the library when a label is missing, and finds them.
"""

from __future__ import annotations

import asyncio
import multiprocessing

from keymanager.domain import ciphertext as ct
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm
from keymanager.hsm import Hsm
from tests.conftest import TEST_PIN, TEST_PKCS11_MODULE
from tests.support.hsm_child import generate


def test_a_key_made_by_another_process_is_found_after_writing_here(hsm: Hsm, softhsm_token: str) -> None:
    own = hsm.generate_version(new_id(), 1, Algorithm.AES_256_CBC_HMAC_SHA256)  # this process has written
    key_id = new_id()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=generate, args=(TEST_PKCS11_MODULE, softhsm_token, TEST_PIN, key_id, results))
    child.start()
    objects = results.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    again = hsm.generate_version(new_id(), 1, Algorithm.AES_256_CBC_HMAC_SHA256)  # and writes again after the other did

    head = ct.header(key_id, 1)
    body = hsm.encrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, b"4111111111111111", b"")
    assert asyncio.run(hsm.adecrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, body, b"")) == b"4111111111111111"
    for version in (own, again, objects):
        hsm.destroy_version(version)
