"""SoftHSM's quirks apply to SoftHSM only; a missing key object answers the same on every operation.

The strategy is chosen from the module's path. A module under another name (here SoftHSM itself
behind a symbolic link, loaded in a child process so it is the only library there) gets the
plain behaviour: a missing label is missing, without re-initialising the library.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from pkcs11 import exceptions as p11

from keymanager.config import SOFTHSM_MODULE
from keymanager.domain import ciphertext as ct
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm
from keymanager.errors import HsmUnavailable, KeyMaterialMissing
from keymanager.hsm import Hsm, version_labels
from keymanager.hsm.quirks import PlainModule, SoftHsmModule, quirks_for
from tests.conftest import TEST_PIN
from tests.support.hsm_child import look_up_a_missing_label


def _in_child(module: str, token_label: str) -> tuple[Any, ...]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=look_up_a_missing_label, args=(module, token_label, TEST_PIN, results))
    child.start()
    outcome: tuple[Any, ...] = results.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    return outcome


def test_the_strategy_follows_the_module_path() -> None:
    assert isinstance(quirks_for(SOFTHSM_MODULE), SoftHsmModule)
    assert type(quirks_for("/opt/vendor/lib/libcryptoki.so")) is PlainModule


def test_a_plain_module_does_not_reinitialise_on_a_missing_label(tmp_path: Path, softhsm_token: str) -> None:
    vendor = tmp_path / "libvendor-pkcs11.so"
    vendor.symlink_to(SOFTHSM_MODULE)
    # quirks, error, session kept, cached copy kept
    assert _in_child(str(vendor), softhsm_token) == ("plain", "KeyMaterialMissing", True, True)


def test_softhsm_reinitialises_on_a_missing_label(softhsm_token: str) -> None:
    """The same look-up through SoftHSM's own path starts the library afresh (so the test above can fail)."""
    assert _in_child(SOFTHSM_MODULE, softhsm_token) == ("softhsm", "KeyMaterialMissing", False, False)


class _DestroyFails:
    """A session whose objects answer ``error`` once when destroyed (another process was first, say)."""

    def __init__(self, session: Any, error: Exception) -> None:
        self._session = session
        self._error: Exception | None = error

    def get_objects(self, template: Any) -> list[Any]:
        return [_Destroyable(obj, self) for obj in self._session.get_objects(template)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class _Destroyable:
    def __init__(self, obj: Any, owner: _DestroyFails) -> None:
        self._obj, self._owner = obj, owner

    def destroy(self) -> None:
        error, self._owner._error = self._owner._error, None
        if error is not None:
            raise error
        self._obj.destroy()


@pytest.mark.parametrize(
    ("quirks", "destroyed"), [(SoftHsmModule(), True), (PlainModule(), False)], ids=["softhsm", "plain"]
)
def test_general_error_reads_as_destroyed_elsewhere_only_for_softhsm(
    hsm: Hsm, monkeypatch: pytest.MonkeyPatch, quirks: PlainModule, destroyed: bool
) -> None:
    objects = hsm.generate_version(new_id(), 1, Algorithm.AES_256_GCM)
    failing = _DestroyFails(hsm.call(lambda token: token.session()), p11.GeneralError())
    monkeypatch.setattr(hsm._token, "quirks", quirks)
    monkeypatch.setattr(hsm._token, "session", lambda: failing)
    if destroyed:
        hsm.destroy_version(objects)  # looked again, and destroyed it
    else:
        with pytest.raises(HsmUnavailable):
            hsm.destroy_version(objects)
    monkeypatch.undo()
    assert (objects.enc_label in hsm.find_labels("km/")) is not destroyed
    hsm.destroy_version(objects)
    assert objects.enc_label not in hsm.find_labels("km/")


@pytest.mark.parametrize("algorithm", [Algorithm.AES_256_CBC_HMAC_SHA256, Algorithm.AES_256_GCM])
def test_a_missing_key_object_answers_the_same_on_every_operation(hsm: Hsm, algorithm: Algorithm) -> None:
    """A version the database names but the token lacks is the server's fault: KeyMaterialMissing
    (503) for encryption, decryption (one or a batch), data keys and MACs alike."""
    key_id = new_id()
    objects = version_labels(key_id, 1, algorithm)
    mac_objects = version_labels(key_id, 1, Algorithm.HMAC_SHA256)
    head = ct.header(key_id, 1)
    body = bytes(64)
    operations = {
        "encrypt": hsm.aencrypt(objects, algorithm, head, b"4111", b""),
        "decrypt": hsm.adecrypt(objects, algorithm, head, body, b""),
        "decrypt_many": hsm.adecrypt_many(algorithm, [(objects, head, body, b"")]),
        "data_key": hsm.adata_key(objects, algorithm, head, 32, b""),
        "mac": hsm.amac(mac_objects, b"4111"),
    }
    answers = {}
    for name, operation in operations.items():
        with pytest.raises(HsmUnavailable) as info:
            asyncio.run(operation)
        answers[name] = (type(info.value), info.value.status, info.value.code, str(info.value))
    expected = (KeyMaterialMissing, 503, "hsm_unavailable", "a key object is missing from the HSM")
    assert answers == dict.fromkeys(operations, expected)
    hsm.ping()
