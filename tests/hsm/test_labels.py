"""Listing km/ labels afresh (objects another process made after this one wrote) and destroying one label."""

from __future__ import annotations

import multiprocessing

from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm
from keymanager.hsm import Hsm
from tests.conftest import TEST_PIN, TEST_PKCS11_MODULE
from tests.support.hsm_child import generate


def test_a_fresh_listing_sees_another_process_objects_and_a_label_is_destroyed_idempotently(
    hsm: Hsm, softhsm_token: str
) -> None:
    own = hsm.generate_version(new_id(), 1, Algorithm.AES_256_CBC_HMAC_SHA256)  # this process has written
    key_id = new_id()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=generate, args=(TEST_PKCS11_MODULE, softhsm_token, TEST_PIN, key_id, results))
    child.start()
    theirs = results.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert theirs.enc_label and theirs.mac_label

    listed = hsm.find_labels_afresh(f"km/{key_id}/")

    assert listed == sorted([theirs.enc_label, theirs.mac_label])
    hsm.destroy_label(theirs.enc_label)
    hsm.destroy_label(theirs.enc_label)  # nothing left: fine
    assert hsm.find_labels_afresh(f"km/{key_id}/") == [theirs.mac_label]
    hsm.destroy_label(theirs.mac_label)
    assert hsm.find_labels_afresh(f"km/{key_id}/") == []
    assert own.enc_label in hsm.find_labels_afresh("km/")  # others untouched
    hsm.destroy_version(own)
