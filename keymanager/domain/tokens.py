"""Format-preserving tokens: a key's token format and FF1 applied to the part of a value it hides.

A token format (fixed when an ``FF1_AES_256`` key is created) says:

* ``alphabet``: ``digits`` (radix 10) or ``alphanumeric`` (radix 36: ``0-9`` then ``a-z``,
  lowercase only; an uppercase letter is refused, never folded, so every token comes back as
  exactly the value that went in).
* ``keep_first`` (0-6) and ``keep_last`` (0-4): characters left in clear at each end; the
  middle is encrypted with FF1.
* ``luhn`` (digits only): ``ignore``; ``valid``: values must pass the Luhn check (card
  numbers) and so does every token; ``invalid``: values must pass it and no token does, so a
  token can never be taken for a card number.

Separators. Spaces and dashes may appear anywhere in a value; they are not encrypted, do not
count as characters, and come back in the same places in the token (and in the value when
detokenized), so ``4111 1111 1111 1111`` and ``4111111111111111`` give the same digits.

Luhn. Cycle-walking (re-encrypting until the token passes) can map Luhn-valid values only onto
Luhn-valid tokens, so ``invalid`` could not take card numbers; and it costs 10 encryptions per
token on average, with a long tail whose length a timer could see. Instead one position of the
middle, its last, is the *free digit*: in a Luhn-valid value it is redundant (the other digits
fix it), so FF1 encrypts the middle without it, and the token's free digit is then chosen so the
whole token's Luhn sum is ``0`` (mod 10) for ``valid`` and :data:`INVALID_RESIDUE` for
``invalid``. This is a bijection between Luhn-valid values and tokens of the rule, costs exactly
one FF1 encryption, and detokenizing recomputes the value's check digit.

Domain rule (SP 800-38G Rev. 1). The encrypted part must have at least 10^6 possible values:
``radix ** m >= 10^6`` with ``m`` the middle's length, minus one under a Luhn rule. A shorter
value is refused with InvalidRequest naming the rule (e.g. a 16-digit card with ``keep_first`` 6
and ``keep_last`` 4 under ``luhn: valid`` leaves 10^5 values).

Tweak. An explicit tweak (0-32 bytes) is used as is; otherwise a context becomes
``SHA-256(b"km-ff1-context\\0" || canonical context JSON)`` (32 bytes); neither is the empty
tweak. Tokens are deterministic per key version and tweak.

No message here ever carries a value or a token.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from keymanager.domain.ciphertext import canonical_context
from keymanager.domain.ff1 import ALPHABET, FF1, MAX_TWEAK_BYTES, MIN_DOMAIN
from keymanager.errors import InvalidRequest

MAX_VALUE_CHARS = 64
"""The longest value or token accepted, separators included."""
SEPARATORS = frozenset(" -")
INVALID_RESIDUE = 5
"""Under ``luhn: invalid`` every token's Luhn sum is 5 (mod 10)."""
CONTEXT_TWEAK_PREFIX = b"km-ff1-context\x00"


class TokenAlphabet(enum.StrEnum):
    DIGITS = "digits"
    ALPHANUMERIC = "alphanumeric"


class Luhn(enum.StrEnum):
    IGNORE = "ignore"
    VALID = "valid"
    INVALID = "invalid"


_RADIX = {TokenAlphabet.DIGITS: 10, TokenAlphabet.ALPHANUMERIC: 36}
_FIELDS = {"alphabet", "keep_first", "keep_last", "luhn"}


@dataclass(frozen=True)
class TokenFormat:
    """A key's token format; build it from JSON with :meth:`parse`."""

    alphabet: TokenAlphabet = TokenAlphabet.DIGITS
    keep_first: int = 0
    keep_last: int = 0
    luhn: Luhn = Luhn.IGNORE

    @property
    def radix(self) -> int:
        return _RADIX[self.alphabet]

    @classmethod
    def parse(cls, raw: Mapping[str, object]) -> TokenFormat:
        """The format described by ``raw`` (the API's ``token_format``); InvalidRequest if it is not one."""
        unknown = set(raw) - _FIELDS
        if unknown:
            raise InvalidRequest(f"token_format has unknown fields: {', '.join(sorted(unknown)[:4])[:100]}")
        try:
            alphabet = TokenAlphabet(str(raw.get("alphabet", "digits")))
            luhn = Luhn(str(raw.get("luhn", "ignore")))
        except ValueError:
            raise InvalidRequest(
                "token_format: alphabet is 'digits' or 'alphanumeric'; luhn is 'ignore', 'valid' or 'invalid'"
            ) from None
        first, last = raw.get("keep_first", 0), raw.get("keep_last", 0)
        if type(first) is not int or not 0 <= first <= 6:
            raise InvalidRequest("token_format: keep_first is an integer from 0 to 6")
        if type(last) is not int or not 0 <= last <= 4:
            raise InvalidRequest("token_format: keep_last is an integer from 0 to 4")
        if luhn is not Luhn.IGNORE and alphabet is not TokenAlphabet.DIGITS:
            raise InvalidRequest("token_format: a Luhn rule needs the 'digits' alphabet")
        return cls(alphabet, first, last, luhn)

    def to_json(self) -> dict[str, object]:
        """The JSON form (what :meth:`parse` reads)."""
        return {
            "alphabet": str(self.alphabet),
            "keep_first": self.keep_first,
            "keep_last": self.keep_last,
            "luhn": str(self.luhn),
        }


def context_tweak(context: Mapping[str, str] | None, tweak: bytes | None) -> bytes:
    """The FF1 tweak of a request: ``tweak`` as given, else the context's digest, else empty."""
    if tweak is not None and context:
        raise InvalidRequest("give either tweak or context, not both")
    if tweak is not None:
        if len(tweak) > MAX_TWEAK_BYTES:
            raise InvalidRequest(f"the tweak is at most {MAX_TWEAK_BYTES} bytes")
        return tweak
    if not context:
        return b""
    return hashlib.sha256(CONTEXT_TWEAK_PREFIX + canonical_context(context)).digest()


@dataclass(frozen=True)
class _Split:
    """A value cut into its parts: characters (no separators), where separators go, the middle's bounds."""

    chars: str
    separators: tuple[tuple[int, str], ...]
    start: int
    end: int

    def rebuild(self, chars: str) -> str:
        out = list(chars)
        for index, sep in self.separators:
            out.insert(index, sep)
        return "".join(out)


def check_value(fmt: TokenFormat, value: str) -> None:
    """Raise InvalidRequest unless ``value`` can be tokenized under ``fmt`` (no cryptography involved)."""
    _split(fmt, value, "value")


def check_token(fmt: TokenFormat, token: str) -> None:
    """Raise InvalidRequest unless ``token`` can be a token of ``fmt`` (no cryptography involved)."""
    _split(fmt, token, "token")


def tokenize(ff1: FF1, fmt: TokenFormat, value: str, tweak: bytes) -> str:
    """The token of ``value``: same length, separators and kept characters, the middle FF1-encrypted.

    ``ff1`` must be over ``fmt.radix``. Raises InvalidRequest for a value the format refuses.
    """
    parts = _split(fmt, value, "value")
    chars = parts.chars
    if fmt.luhn is Luhn.IGNORE:
        middle = ff1.encrypt_text(chars[parts.start : parts.end], tweak)
        return parts.rebuild(chars[: parts.start] + middle + chars[parts.end :])
    free = parts.end - 1
    middle = ff1.encrypt_text(chars[parts.start : free], tweak)
    target = 0 if fmt.luhn is Luhn.VALID else INVALID_RESIDUE
    token = _with_free_digit(chars[: parts.start] + middle + "0" + chars[parts.end :], free, target)
    return parts.rebuild(token)


def detokenize(ff1: FF1, fmt: TokenFormat, token: str, tweak: bytes) -> str:
    """The value of ``token`` (the inverse of :func:`tokenize` for the same key version and tweak)."""
    parts = _split(fmt, token, "token")
    chars = parts.chars
    if fmt.luhn is Luhn.IGNORE:
        middle = ff1.decrypt_text(chars[parts.start : parts.end], tweak)
        return parts.rebuild(chars[: parts.start] + middle + chars[parts.end :])
    free = parts.end - 1
    middle = ff1.decrypt_text(chars[parts.start : free], tweak)
    value = _with_free_digit(chars[: parts.start] + middle + "0" + chars[parts.end :], free, 0)
    return parts.rebuild(value)


def luhn_residue(digits: str) -> int:
    """The Luhn sum of ``digits`` mod 10 (0: the check passes)."""
    total = 0
    for k, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if k % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10


_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)
"""A digit's Luhn contribution in a doubled position (a permutation of 0-9)."""


def _with_free_digit(digits: str, position: int, target: int) -> str:
    """``digits`` with the digit at ``position`` set so that the Luhn residue is ``target``."""
    base = luhn_residue(digits[:position] + "0" + digits[position + 1 :])
    needed = (target - base) % 10
    doubled = (len(digits) - 1 - position) % 2 == 1
    digit = _DOUBLED.index(needed) if doubled else needed
    return digits[:position] + str(digit) + digits[position + 1 :]


def _split(fmt: TokenFormat, value: str, what: str) -> _Split:
    if len(value) > MAX_VALUE_CHARS:
        raise InvalidRequest(f"a {what} is at most {MAX_VALUE_CHARS} characters")
    allowed = ALPHABET[: fmt.radix]
    chars: list[str] = []
    separators: list[tuple[int, str]] = []
    for index, ch in enumerate(value):
        if ch in SEPARATORS:
            separators.append((index, ch))
        elif ch in allowed:
            chars.append(ch)
        else:
            raise InvalidRequest(f"a {what} of this key has only the characters {allowed!r}, spaces and dashes")
    text = "".join(chars)
    start, end = fmt.keep_first, len(text) - fmt.keep_last
    _check_domain(fmt, end - start, what)
    if fmt.luhn is Luhn.IGNORE:
        pass
    elif what == "value" and luhn_residue(text) != 0:
        raise InvalidRequest(f"luhn '{fmt.luhn}': a value of this key must pass the Luhn check")
    elif what == "token" and luhn_residue(text) != (0 if fmt.luhn is Luhn.VALID else INVALID_RESIDUE):
        raise InvalidRequest(f"luhn '{fmt.luhn}': this is not a token of this key (wrong Luhn sum)")
    return _Split(text, tuple(separators), start, end)


def _check_domain(fmt: TokenFormat, middle: int, what: str) -> None:
    free = middle - (0 if fmt.luhn is Luhn.IGNORE else 1)
    if free < 2 or fmt.radix**free < MIN_DOMAIN:
        raise InvalidRequest(
            f"domain rule (NIST SP 800-38G Rev. 1): the encrypted part of a {what} must have at least "
            f"{MIN_DOMAIN:,} possible values; with {max(middle, 0)} characters between keep_first "
            f"{fmt.keep_first} and keep_last {fmt.keep_last} under luhn '{fmt.luhn}' it has "
            f"{fmt.radix}^{max(free, 0)}"
        )
