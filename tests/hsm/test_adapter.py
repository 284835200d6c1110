"""The PKCS#11 adapter against the run's SoftHSM token: key templates, round trips, failures.

Every PKCS#11 call runs on the adapter's own thread (``hsm.call``): SoftHSM is not
initialised for concurrent callers, so the tests never touch pkcs11 from their own thread.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pkcs11
import pytest
from pkcs11 import Attribute, KeyType
from pkcs11 import exceptions as p11

from keymanager.domain import ciphertext as ct
from keymanager.domain.credentials import new_id
from keymanager.domain.key_specs import SYMMETRIC, spec_of
from keymanager.domain.models import HMAC_KEY_BITS, Algorithm, HsmObjects
from keymanager.errors import DecryptionFailed, HsmUnavailable
from keymanager.hsm import Hsm, operations, version_labels
from keymanager.hsm.dispatch import HsmRefused
from tests.conftest import TEST_PIN

pytestmark = pytest.mark.softhsm

ENC_ALGORITHMS = [Algorithm.AES_256_CBC_HMAC_SHA256, Algorithm.AES_256_GCM]

Version = tuple[str, HsmObjects]


@pytest.fixture
def make_version(hsm: Hsm) -> Iterator[Callable[[Algorithm], Version]]:
    """Generate key versions in the token; destroy them after the test."""
    made: list[HsmObjects] = []

    def make(algorithm: Algorithm) -> Version:
        key_id = new_id()
        objects = hsm.generate_version(key_id, 1, algorithm)
        made.append(objects)
        return key_id, objects

    yield make
    for objects in made:
        hsm.destroy_version(objects)


def _labels(objects: HsmObjects) -> list[str]:
    return [label for label in (objects.enc_label, objects.mac_label) if label is not None]


def _attributes(hsm: Hsm, label: str, names: list[Attribute]) -> dict[Attribute, Any]:
    def read(token: Any) -> dict[Attribute, Any]:
        key = token.session().get_key(object_class=pkcs11.ObjectClass.SECRET_KEY, label=label)
        return {name: key[name] for name in names}

    return hsm.call(read)


def _read_value(hsm: Hsm, label: str) -> bytes | Exception:
    """The key's CKA_VALUE, or the exception the HSM answers reading it."""

    def read(token: Any) -> bytes | Exception:
        key = token.session().get_key(object_class=pkcs11.ObjectClass.SECRET_KEY, label=label)
        try:
            return bytes(key[Attribute.VALUE])
        except p11.PKCS11Error as exc:
            return exc

    return hsm.call(read)


def _lose_session(hsm: Hsm) -> None:
    """Close the adapter's session underneath it, as a dropped HSM connection would."""
    hsm.call(lambda token: token._session.close())


# -- where key material lives ---------------------------------------------------------


def test_version_labels() -> None:
    key_id = "ab" * 16
    assert version_labels(key_id, 3, Algorithm.AES_256_CBC_HMAC_SHA256) == HsmObjects(
        enc_label=f"km/{key_id}/v3/aes", mac_label=f"km/{key_id}/v3/hmac"
    )
    assert version_labels(key_id, 1, Algorithm.AES_256_GCM) == HsmObjects(
        enc_label=f"km/{key_id}/v1/aes", mac_label=None
    )
    assert version_labels(key_id, 2, Algorithm.HMAC_SHA256) == HsmObjects(
        enc_label=None, mac_label=f"km/{key_id}/v2/hmac"
    )


@pytest.mark.parametrize("algorithm", SYMMETRIC)
def test_key_value_cannot_be_read(hsm: Hsm, make_version: Callable[[Algorithm], Version], algorithm: Algorithm) -> None:
    _, objects = make_version(algorithm)
    assert _labels(objects)
    for label in _labels(objects):
        assert isinstance(_read_value(hsm, label), p11.AttributeSensitive)


@pytest.mark.parametrize("algorithm", SYMMETRIC)
def test_key_templates(hsm: Hsm, make_version: Callable[[Algorithm], Version], algorithm: Algorithm) -> None:
    _, objects = make_version(algorithm)
    common = {
        Attribute.TOKEN: True,
        Attribute.PRIVATE: True,
        Attribute.SENSITIVE: True,
        Attribute.ALWAYS_SENSITIVE: True,
        Attribute.EXTRACTABLE: False,
        Attribute.NEVER_EXTRACTABLE: True,
        Attribute.VALUE_LEN: 32,
        Attribute.WRAP: False,
        Attribute.UNWRAP: False,
        Attribute.DERIVE: False,
    }
    if objects.enc_label is not None:
        aes = {
            **common,
            Attribute.VALUE_LEN: spec_of(algorithm).key_bytes,  # 32, or 16 and 24 for AES_128_GCM, AES_192_GCM
            Attribute.KEY_TYPE: KeyType.AES,
            Attribute.ENCRYPT: True,
            Attribute.DECRYPT: algorithm is not Algorithm.FF1_AES_256,  # FF1 needs only the forward cipher
            Attribute.SIGN: False,
            Attribute.VERIFY: False,
        }
        assert _attributes(hsm, objects.enc_label, list(aes)) == aes
    if objects.mac_label is not None:
        mac = {
            **common,
            Attribute.VALUE_LEN: HMAC_KEY_BITS.get(algorithm, 256) // 8,  # an HMAC key is as long as its digest
            Attribute.KEY_TYPE: KeyType.GENERIC_SECRET,
            Attribute.SIGN: True,
            Attribute.VERIFY: True,
            Attribute.ENCRYPT: False,
            Attribute.DECRYPT: False,
        }
        assert _attributes(hsm, objects.mac_label, list(mac)) == mac


@pytest.mark.parametrize("algorithm", list(HMAC_KEY_BITS))
def test_hmac_keys_compute_their_own_digest(
    hsm: Hsm, make_version: Callable[[Algorithm], Version], algorithm: Algorithm
) -> None:
    _, objects = make_version(algorithm)
    _, other = make_version(algorithm)
    first = asyncio.run(hsm.amac(objects, b"4111111111111111", algorithm))
    assert len(first) == HMAC_KEY_BITS[algorithm] // 8
    assert asyncio.run(hsm.amac(objects, b"4111111111111111", algorithm)) == first
    assert asyncio.run(hsm.amac(objects, b"4111111111111112", algorithm)) != first
    assert asyncio.run(hsm.amac(other, b"4111111111111111", algorithm)) != first


@pytest.mark.parametrize("algorithm", ENC_ALGORITHMS)
def test_cached_session_copies_stay_sensitive(
    hsm: Hsm, make_version: Callable[[Algorithm], Version], algorithm: Algorithm
) -> None:
    key_id, objects = make_version(algorithm)
    hsm.encrypt(objects, algorithm, ct.header(key_id, 1), b"warm the cache", b"")

    def inspect(token: Any) -> list[tuple[bool, bool, bool, type[Exception] | None]]:
        found = []
        for label in _labels(objects):
            copy = token._keys[label]
            try:
                copy[Attribute.VALUE]
                error = None
            except p11.PKCS11Error as exc:
                error = type(exc)
            found.append((copy[Attribute.SENSITIVE], copy[Attribute.EXTRACTABLE], copy[Attribute.TOKEN], error))
        return found

    assert hsm.call(inspect) == [(True, False, False, p11.AttributeSensitive)] * len(_labels(objects))


def test_generate_find_destroy(hsm: Hsm) -> None:
    key_id = new_id()
    prefix = f"km/{key_id}/"
    assert hsm.find_labels(prefix) == []
    objects = hsm.generate_version(key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256)
    try:
        assert objects.enc_label is not None and objects.mac_label is not None
        # The labels name the key and version (perhaps with a per-generation suffix).
        assert re.fullmatch(rf"km/{key_id}/v1(\.[0-9a-f]+)?/aes", objects.enc_label)
        assert objects.mac_label == objects.enc_label.removesuffix("/aes") + "/hmac"
        assert hsm.find_labels(prefix) == sorted([objects.enc_label, objects.mac_label])
        assert objects.enc_label in hsm.find_labels("km/")
    finally:
        hsm.destroy_version(objects)
    assert hsm.find_labels(prefix) == []
    hsm.destroy_version(objects)  # absent objects are ignored


def test_destroyed_version_no_longer_encrypts(hsm: Hsm) -> None:
    key_id = new_id()
    objects = hsm.generate_version(key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256)
    head = ct.header(key_id, 1)
    hsm.encrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, b"x", b"")  # cached copy exists now
    hsm.destroy_version(objects)
    with pytest.raises(HsmUnavailable):
        hsm.encrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, b"x", b"")
    hsm.ping()


# -- cryptography ---------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ENC_ALGORITHMS)
def test_round_trip_and_body_layout(
    hsm: Hsm, make_version: Callable[[Algorithm], Version], algorithm: Algorithm
) -> None:
    key_id, objects = make_version(algorithm)
    head = ct.header(key_id, 1)
    context = ct.canonical_context({"table": "cards"})
    for size in (0, 1, 15, 16, 17, 1000):
        plaintext = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
        body = hsm.encrypt(objects, algorithm, head, plaintext, context)
        if algorithm is Algorithm.AES_256_GCM:
            assert len(body) == ct.NONCE_BYTES + size + ct.TAG_BYTES
        else:
            assert len(body) == ct.IV_BYTES + (size // 16 + 1) * 16 + ct.MAC_BYTES
        assert plaintext not in body or size < 2
        assert asyncio.run(hsm.adecrypt(objects, algorithm, head, body, context)) == plaintext


@pytest.mark.parametrize("algorithm", ENC_ALGORITHMS)
def test_two_encryptions_differ(hsm: Hsm, make_version: Callable[[Algorithm], Version], algorithm: Algorithm) -> None:
    key_id, objects = make_version(algorithm)
    head = ct.header(key_id, 1)
    bodies = {hsm.encrypt(objects, algorithm, head, b"4111111111111111", b"") for _ in range(5)}
    bodies.add(asyncio.run(hsm.aencrypt(objects, algorithm, head, b"4111111111111111", b"")))
    assert len(bodies) == 6
    assert len({body[:12] for body in bodies}) == 6  # fresh IV / nonce each time


@pytest.mark.parametrize("algorithm", ENC_ALGORITHMS)
def test_authentication_failures(hsm: Hsm, make_version: Callable[[Algorithm], Version], algorithm: Algorithm) -> None:
    key_id, objects = make_version(algorithm)
    other_id, other = make_version(algorithm)
    head = ct.header(key_id, 1)
    context = ct.canonical_context({"a": "1"})
    body = hsm.encrypt(objects, algorithm, head, b"0123456789abcdef", context)
    bad: list[tuple[HsmObjects, bytes, bytes, bytes]] = [
        (objects, head, body, b""),  # context missing
        (objects, head, body, ct.canonical_context({"a": "2"})),  # other context
        (objects, ct.header(key_id, 2), body, context),  # other version in the header
        (objects, ct.header(other_id, 1), body, context),  # other key id in the header
        (other, head, body, context),  # other key
        (objects, head, body[:-1], context),
        (objects, head, body + b"\x00", context),
        (objects, head, body[:16], context),
        (objects, head, b"", context),
    ]
    for index in range(len(body)):
        flipped = bytearray(body)
        flipped[index] ^= 0x01
        bad.append((objects, head, bytes(flipped), context))
    for objs, hd, bd, cx in bad:
        with pytest.raises(DecryptionFailed) as info:
            asyncio.run(hsm.adecrypt(objs, algorithm, hd, bd, cx))
        assert str(info.value) == "decryption failed"
    assert asyncio.run(hsm.adecrypt(objects, algorithm, head, body, context)) == b"0123456789abcdef"


def test_cbc_mac_is_checked_before_decryption(hsm: Hsm, make_version: Callable[[Algorithm], Version]) -> None:
    """A body with a valid MAC but bad padding cannot be made without the key; a bad MAC with
    any padding is refused the same way, so the padding is never an oracle."""
    key_id, objects = make_version(Algorithm.AES_256_CBC_HMAC_SHA256)
    head = ct.header(key_id, 1)
    body = hsm.encrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, b"x" * 16, b"")
    # Flip the last byte of the second-to-last CBC block: the padding of the last block breaks.
    padding_broken = bytearray(body)
    padding_broken[-ct.MAC_BYTES - 17] ^= 0xFF
    iv_broken = bytearray(body)
    iv_broken[0] ^= 0xFF  # decrypts fine (first block changes), MAC fails
    errors = []
    for candidate in (padding_broken, iv_broken):
        with pytest.raises(DecryptionFailed) as info:
            asyncio.run(hsm.adecrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, bytes(candidate), b""))
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_random(hsm: Hsm) -> None:
    values = {hsm.random(32) for _ in range(4)}
    assert len(values) == 4
    assert all(len(v) == 32 for v in values)
    assert len(hsm.random(1)) == 1


def test_calls_from_many_threads(hsm: Hsm, make_version: Callable[[Algorithm], Version]) -> None:
    key_id, objects = make_version(Algorithm.AES_256_CBC_HMAC_SHA256)
    head = ct.header(key_id, 1)
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                data = f"{n}-{i}".encode()
                body = hsm.encrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, data, b"")
                assert asyncio.run(hsm.adecrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, body, b"")) == data
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []


def test_call_runs_on_the_hsm_thread(hsm: Hsm) -> None:
    name = hsm.call(lambda token: threading.current_thread().name)
    assert name.startswith("hsm")
    # A nested call from the HSM thread runs inline instead of dead-locking.
    assert hsm.call(lambda token: hsm.call(lambda inner: threading.current_thread().name)).startswith("hsm")


# -- failures -------------------------------------------------------------------------


def test_lost_session_is_unavailable_once_then_reopened(hsm: Hsm, make_version: Callable[[Algorithm], Version]) -> None:
    key_id, objects = make_version(Algorithm.AES_256_CBC_HMAC_SHA256)
    head = ct.header(key_id, 1)
    body = hsm.encrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, b"before", b"")

    _lose_session(hsm)
    with pytest.raises(HsmUnavailable):
        hsm.encrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, b"during", b"")
    assert asyncio.run(hsm.adecrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, body, b"")) == b"before"

    _lose_session(hsm)
    with pytest.raises(HsmUnavailable):
        asyncio.run(hsm.adecrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, body, b""))
    hsm.ping()

    _lose_session(hsm)
    with pytest.raises(HsmUnavailable):
        hsm.ping()
    hsm.ping()
    assert asyncio.run(hsm.adecrypt(objects, Algorithm.AES_256_CBC_HMAC_SHA256, head, body, b"")) == b"before"


def test_missing_key_object_is_unavailable(hsm: Hsm) -> None:
    objects = version_labels(new_id(), 1, Algorithm.AES_256_GCM)
    with pytest.raises(HsmUnavailable) as info:
        hsm.encrypt(objects, Algorithm.AES_256_GCM, b"km:1:x:1:", b"data", b"")
    assert "data" not in str(info.value)
    hsm.ping()


class _FailingSecondGenerate:
    """A session that lets the first key generation through and fails the second."""

    def __init__(self, session: Any, error: Exception) -> None:
        self._session = session
        self._error = error
        self.calls = 0

    def generate_key(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            raise self._error
        return self._session.generate_key(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@pytest.mark.parametrize("error", [p11.DeviceError(), p11.GeneralError(), p11.DeviceMemory()])
def test_failed_generation_leaves_nothing(hsm: Hsm, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    before = hsm.find_labels("km/")
    real = hsm.call(lambda token: token.session())
    failing = _FailingSecondGenerate(real, error)
    monkeypatch.setattr(hsm._token, "session", lambda: failing)
    key_id = new_id()
    with pytest.raises(HsmUnavailable):
        hsm.generate_version(key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256)
    monkeypatch.undo()
    assert failing.calls == 2
    assert hsm.find_labels(f"km/{key_id}/") == []
    assert hsm.find_labels("km/") == before
    hsm.ping()


def test_refused_template_is_the_requests_error_and_leaves_nothing(hsm: Hsm, monkeypatch: pytest.MonkeyPatch) -> None:
    """An HSM that refuses the MAC key's template (after the AES key was made) answers HsmRefused
    (400 naming the return code), never a raw PKCS#11 error, and the AES key is removed again."""
    before = hsm.find_labels("km/")
    monkeypatch.setattr(
        operations, "HMAC_TEMPLATE", {**operations.HMAC_TEMPLATE, Attribute.CLASS: pkcs11.ObjectClass.PUBLIC_KEY}
    )
    key_id = new_id()
    with pytest.raises(HsmRefused, match="CKR_"):
        hsm.generate_version(key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256)
    assert hsm.find_labels("km/") == before


def test_pin_in_no_message_or_repr(hsm: Hsm) -> None:
    assert TEST_PIN not in repr(hsm)
    assert TEST_PIN not in repr(hsm._token)
    _lose_session(hsm)
    with pytest.raises(HsmUnavailable) as info:
        hsm.ping()
    assert TEST_PIN not in str(info.value) and TEST_PIN not in repr(info.value)
    hsm.ping()
