"""FF1: the NIST SP 800-38G samples byte for byte, bounds, and a cross-check against a reference.

The block cipher here is software AES from ``cryptography`` keyed with the sample keys (tests
only; the service's AES runs in the HSM, see tests/hsm/test_tokenization.py).
"""

from __future__ import annotations

import random

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from keymanager.domain.ff1 import FF1, MAX_NUMERALS, Prf, min_length
from keymanager.errors import InvalidRequest
from tests.domain.ff1_reference import ReferenceFF1

KEY_128 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3C")
KEY_192 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F")
KEY_256 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94")
TWEAK_2 = bytes.fromhex("39383736353433323130")
TWEAK_3 = bytes.fromhex("3737373770717273373737")
DIGITS = "0123456789"
ALNUM = "0123456789abcdefghi"

# (sample, key, radix, tweak, plaintext, ciphertext) from NIST's FF1 examples (FF1samples.pdf).
SAMPLES = [
    (1, KEY_128, 10, b"", DIGITS, "2433477484"),
    (2, KEY_128, 10, TWEAK_2, DIGITS, "6124200773"),
    (3, KEY_128, 36, TWEAK_3, ALNUM, "a9tv40mll9kdu509eum"),
    (4, KEY_192, 10, b"", DIGITS, "2830668132"),
    (5, KEY_192, 10, TWEAK_2, DIGITS, "2496655549"),
    (6, KEY_192, 36, TWEAK_3, ALNUM, "xbj3kv35jrawxv32ysr"),
    (7, KEY_256, 10, b"", DIGITS, "6657667009"),
    (8, KEY_256, 10, TWEAK_2, DIGITS, "1001623463"),
    (9, KEY_256, 36, TWEAK_3, ALNUM, "xs8a0azh2avyalyzuwd"),
]


def software_prf(key: bytes, calls: list[bytes] | None = None) -> Prf:
    """CBC-MAC with software AES (zero IV, last block); records each input in ``calls`` if given."""

    def prf(data: bytes) -> bytes:
        assert len(data) % 16 == 0 and data
        if calls is not None:
            calls.append(data)
        enc = Cipher(algorithms.AES(key), modes.CBC(bytes(16))).encryptor()
        return (enc.update(data) + enc.finalize())[-16:]

    return prf


@pytest.mark.parametrize(("sample", "key", "radix", "tweak", "plaintext", "ciphertext"), SAMPLES)
def test_nist_samples(sample: int, key: bytes, radix: int, tweak: bytes, plaintext: str, ciphertext: str) -> None:
    ff1 = FF1(software_prf(key), radix)
    assert ff1.encrypt_text(plaintext, tweak) == ciphertext
    assert ff1.decrypt_text(ciphertext, tweak) == plaintext
    reference = ReferenceFF1(key, radix)
    numerals = [int(ch, 36) for ch in plaintext]
    encrypted = reference.encrypt(numerals, tweak)
    assert "".join("0123456789abcdefghijklmnopqrstuvwxyz"[x] for x in encrypted) == ciphertext
    assert reference.decrypt(encrypted, tweak) == numerals


def test_one_prf_call_per_round_for_short_strings() -> None:
    calls: list[bytes] = []
    FF1(software_prf(KEY_256, calls), 10).encrypt_text("411111111111", b"ctx")
    assert len(calls) == 10
    # Long strings need more than 16 bytes of S per round: one more block each.
    calls.clear()
    FF1(software_prf(KEY_256, calls), 36).encrypt_text("z" * 60)
    assert len(calls) == 20


def test_min_length_follows_the_domain_rule() -> None:
    assert min_length(10) == 6
    assert min_length(36) == 4
    assert min_length(2) == 20
    assert min_length(26) == 5  # 26^4 = 456,976 < 10^6 <= 26^5


@pytest.mark.parametrize(
    ("radix", "text", "tweak", "rule"),
    [
        (10, "12345", b"", "at least 6 numerals"),
        (36, "abc", b"", "at least 4 numerals"),
        (10, "1" * (MAX_NUMERALS + 1), b"", "at most"),
        (10, "123456", bytes(33), "tweak is at most 32 bytes"),
        (10, "12345a", b"", "only the characters"),
        (16, "ABCDEF", b"", "only the characters"),
    ],
)
def test_bounds_are_refused_naming_the_rule(radix: int, text: str, tweak: bytes, rule: str) -> None:
    ff1 = FF1(software_prf(KEY_256), radix)
    with pytest.raises(InvalidRequest, match=rule) as caught:
        ff1.encrypt_text(text, tweak)
    assert text not in caught.value.message


@pytest.mark.parametrize("radix", [1, 37, 0])
def test_radix_outside_2_to_36_is_refused(radix: int) -> None:
    with pytest.raises(InvalidRequest, match="radix"):
        FF1(software_prf(KEY_256), radix)


@pytest.mark.parametrize(
    ("radix", "lengths"),
    [(10, (6, 19)), (36, (4, 64)), (2, (20, 70)), (26, (5, 12))],
    ids=["digits", "alphanumeric", "binary", "radix26"],
)
def test_cross_check_with_reference(radix: int, lengths: tuple[int, int]) -> None:
    """10,000 random numeral strings and tweaks per format: same result as the reference, and back."""
    rng = random.Random(radix * 7919)
    key = rng.randbytes(32)
    ours, reference = FF1(software_prf(key), radix), ReferenceFF1(key, radix)
    for _ in range(10_000):
        numerals = [rng.randrange(radix) for _ in range(rng.randint(*lengths))]
        tweak = rng.randbytes(rng.randint(0, 32))
        encrypted = ours.encrypt(numerals, tweak)
        assert encrypted == reference.encrypt(numerals, tweak)
        assert ours.decrypt(encrypted, tweak) == numerals
