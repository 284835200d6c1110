"""FF1 format-preserving encryption (NIST SP 800-38G Rev. 1), over a block cipher given from outside.

This module holds no key and no cipher: the caller passes a :data:`Prf`, the CBC-MAC of FF1's
PRF (AES-CBC with a zero IV over a byte string whose length is a multiple of 16, answering the
last 16-byte block). The service passes one that runs in the HSM, so each Feistel round costs
one call to the HSM (plus one per extra 16-byte block of ``S`` when a round needs more than 16
bytes, which happens only for numeral strings longer than about 56 digits). A single block's
CBC-MAC is its AES encryption, so the same callable also serves FF1's ``CIPH``.

Numerals. A numeral string is a sequence of integers in ``[0, radix)``; as text, numeral ``i``
is ``ALPHABET[i]``, so radix 10 is the decimal digits and radix 36 adds the lowercase letters
(the alphabet of the NIST samples).

Bounds (Rev. 1): radix 2-36 here (the standard allows up to 2^16), ``minlen = 2`` and the
domain rule ``radix ** minlen >= 1,000,000``, so a string must have at least
:func:`min_length` numerals; at most :data:`MAX_NUMERALS` numerals (ours, far below the
standard's 2^32, so every input has a small bound); a tweak of at most :data:`MAX_TWEAK_BYTES`.
Violations raise :class:`~keymanager.errors.InvalidRequest` naming the rule; the message never
carries the numerals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from keymanager.errors import InvalidRequest

Prf = Callable[[bytes], bytes]
"""CBC-MAC under the FF1 key: AES-CBC, zero IV, over ``len(data) % 16 == 0`` bytes; the last block."""

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
"""Numeral ``i`` is written ``ALPHABET[i]``; radix ``r`` uses the first ``r`` characters."""

MIN_RADIX = 2
MAX_RADIX = len(ALPHABET)
MIN_DOMAIN = 1_000_000
"""Rev. 1: the domain ``radix ** n`` of every numeral string must hold at least 10^6 values."""
MAX_NUMERALS = 256
"""Our bound on a numeral string's length (the standard allows up to 2^32)."""
MAX_TWEAK_BYTES = 32
ROUNDS = 10
BLOCK = 16


def min_length(radix: int) -> int:
    """The fewest numerals a string of ``radix`` may have: at least 2, and ``radix ** n >= 10^6``."""
    n = 2
    while radix**n < MIN_DOMAIN:
        n += 1
    return n


class FF1:
    """FF1 for one radix over one key's PRF; encrypts and decrypts numeral strings.

    ``encrypt``/``decrypt`` take and return numeral sequences; ``encrypt_text``/``decrypt_text``
    take and return strings over :data:`ALPHABET` (case-sensitive). Both are deterministic:
    the same numerals and tweak always give the same result. Raises InvalidRequest on a bad
    radix, length, numeral or tweak.
    """

    def __init__(self, prf: Prf, radix: int) -> None:
        if not MIN_RADIX <= radix <= MAX_RADIX:
            raise InvalidRequest(f"FF1 radix must be {MIN_RADIX}-{MAX_RADIX}")
        self._prf = prf
        self.radix = radix
        self.min_length = min_length(radix)

    # -- text -----------------------------------------------------------------------
    def encrypt_text(self, text: str, tweak: bytes = b"") -> str:
        """FF1.Encrypt of ``text`` (characters of the radix's alphabet) under ``tweak``."""
        return self._to_text(self.encrypt(self._to_numerals(text), tweak))

    def decrypt_text(self, text: str, tweak: bytes = b"") -> str:
        """FF1.Decrypt of ``text`` under ``tweak``; the inverse of :meth:`encrypt_text`."""
        return self._to_text(self.decrypt(self._to_numerals(text), tweak))

    def _to_numerals(self, text: str) -> list[int]:
        digits = ALPHABET[: self.radix]
        numerals = [digits.find(ch) for ch in text]
        if -1 in numerals:
            raise InvalidRequest(f"FF1 input must use only the characters {digits!r}")
        return numerals

    @staticmethod
    def _to_text(numerals: Sequence[int]) -> str:
        return "".join(ALPHABET[x] for x in numerals)

    # -- numerals ---------------------------------------------------------------------
    def encrypt(self, numerals: Sequence[int], tweak: bytes = b"") -> list[int]:
        """FF1.Encrypt (Algorithm 7): a numeral string of the same length and radix."""
        a, b, u, v = self._split(numerals, tweak)
        rounds = _Rounds(self._prf, self.radix, len(numerals), u, v, tweak)
        for i in range(ROUNDS):
            m = u if i % 2 == 0 else v
            a, b = b, (a + rounds.y(i, b)) % self.radix**m
        return self._join(a, b, u, v)

    def decrypt(self, numerals: Sequence[int], tweak: bytes = b"") -> list[int]:
        """FF1.Decrypt (Algorithm 8): the inverse of :meth:`encrypt` for the same tweak."""
        a, b, u, v = self._split(numerals, tweak)
        rounds = _Rounds(self._prf, self.radix, len(numerals), u, v, tweak)
        for i in reversed(range(ROUNDS)):
            m = u if i % 2 == 0 else v
            a, b = (b - rounds.y(i, a)) % self.radix**m, a
        return self._join(a, b, u, v)

    def _split(self, numerals: Sequence[int], tweak: bytes) -> tuple[int, int, int, int]:
        """Check the input; answer NUM(A), NUM(B), u, v."""
        n = len(numerals)
        if n < self.min_length:
            raise InvalidRequest(
                f"FF1 needs at least {self.min_length} numerals of radix {self.radix} "
                f"(the domain radix^length must hold at least {MIN_DOMAIN:,} values)"
            )
        if n > MAX_NUMERALS:
            raise InvalidRequest(f"FF1 takes at most {MAX_NUMERALS} numerals")
        if len(tweak) > MAX_TWEAK_BYTES:
            raise InvalidRequest(f"the FF1 tweak is at most {MAX_TWEAK_BYTES} bytes")
        if any(not 0 <= x < self.radix for x in numerals):
            raise InvalidRequest(f"FF1 numerals must be in [0, {self.radix})")
        u = n // 2
        return _num(numerals[:u], self.radix), _num(numerals[u:], self.radix), u, n - u

    def _join(self, a: int, b: int, u: int, v: int) -> list[int]:
        return _str(a, self.radix, u) + _str(b, self.radix, v)


class _Rounds:
    """The round function of one FF1 call: ``y = NUM(S)`` for round ``i`` and half ``x``."""

    def __init__(self, prf: Prf, radix: int, n: int, u: int, v: int, tweak: bytes) -> None:
        self._prf = prf
        self._b = ((radix**v - 1).bit_length() + 7) // 8  # ceil(ceil(v * log2(radix)) / 8)
        self._d = 4 * ((self._b + 3) // 4) + 4
        t = len(tweak)
        p = bytes([1, 2, 1]) + radix.to_bytes(3, "big") + bytes([10, u % 256]) + n.to_bytes(4, "big")
        p += t.to_bytes(4, "big")
        self._head = p + tweak + bytes((-t - self._b - 1) % BLOCK)

    def y(self, i: int, x: int) -> int:
        r = self._prf(self._head + bytes([i]) + x.to_bytes(self._b, "big"))
        s = r
        j = 1
        while len(s) < self._d:  # S = R || CIPH(R xor [1]) || CIPH(R xor [2]) || ...
            s += self._prf((int.from_bytes(r, "big") ^ j).to_bytes(BLOCK, "big"))
            j += 1
        return int.from_bytes(s[: self._d], "big")


def _num(numerals: Sequence[int], radix: int) -> int:
    value = 0
    for x in numerals:
        value = value * radix + x
    return value


def _str(value: int, radix: int, length: int) -> list[int]:
    out = [0] * length
    for k in range(length - 1, -1, -1):
        value, out[k] = divmod(value, radix)
    return out
