"""Token formats over FF1 (software AES here; the HSM's in tests/hsm/test_tokenization.py)."""

from __future__ import annotations

import random

import pytest

from keymanager.domain.ff1 import FF1
from keymanager.domain.tokens import (
    INVALID_RESIDUE,
    Luhn,
    TokenAlphabet,
    TokenFormat,
    check_token,
    check_value,
    context_tweak,
    detokenize,
    luhn_residue,
    tokenize,
)
from keymanager.errors import InvalidRequest
from tests.domain.test_ff1 import KEY_256, software_prf

CARD = "4111111111111111"


def engine(fmt: TokenFormat, calls: list[bytes] | None = None) -> FF1:
    return FF1(software_prf(KEY_256, calls), fmt.radix)


def luhn_valid(rng: random.Random, length: int) -> str:
    body = "".join(rng.choice("0123456789") for _ in range(length - 1))
    return next(body + d for d in "0123456789" if luhn_residue(body + d) == 0)


def random_value(rng: random.Random, fmt: TokenFormat, length: int) -> str:
    if fmt.luhn is not Luhn.IGNORE:
        return luhn_valid(rng, length)
    return "".join(rng.choice("0123456789abcdefghijklmnopqrstuvwxyz"[: fmt.radix]) for _ in range(length))


FORMATS = [
    TokenFormat(alphabet, first, last, luhn)
    for alphabet in TokenAlphabet
    for first in (0, 6)
    for last in (0, 4)
    for luhn in Luhn
    if alphabet is TokenAlphabet.DIGITS or luhn is Luhn.IGNORE
]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f"{f.alphabet}-{f.keep_first}-{f.keep_last}-{f.luhn}")
def test_round_trips_keep_the_format(fmt: TokenFormat) -> None:
    rng = random.Random(str(fmt))
    ff1 = engine(fmt)
    shortest = fmt.keep_first + fmt.keep_last + (6 if fmt.radix == 10 else 4) + (fmt.luhn is not Luhn.IGNORE)
    changed = 0
    for _ in range(300):
        value = random_value(rng, fmt, rng.randint(shortest, 24))
        tweak = rng.randbytes(rng.randint(0, 32))
        token = tokenize(ff1, fmt, value, tweak)
        assert len(token) == len(value)
        assert token[: fmt.keep_first] == value[: fmt.keep_first]
        assert token[len(token) - fmt.keep_last :] == value[len(value) - fmt.keep_last :]
        assert set(token) <= set("0123456789abcdefghijklmnopqrstuvwxyz"[: fmt.radix])
        if fmt.luhn is Luhn.VALID:
            assert luhn_residue(token) == 0
        elif fmt.luhn is Luhn.INVALID:
            assert luhn_residue(token) == INVALID_RESIDUE
        assert detokenize(ff1, fmt, token, tweak) == value
        changed += token != value
    assert changed >= 295  # the middle really is encrypted


def test_a_card_keeps_its_last_four_and_passes_luhn_with_one_ff1_per_token() -> None:
    fmt = TokenFormat(keep_last=4, luhn=Luhn.VALID)
    calls: list[bytes] = []
    token = tokenize(engine(fmt, calls), fmt, CARD, b"")
    assert len(calls) == 10  # ten Feistel rounds, one CBC-MAC each
    assert token.endswith("1111") and len(token) == 16 and token.isdigit() and luhn_residue(token) == 0
    assert token != CARD
    assert detokenize(engine(fmt), fmt, token, b"") == CARD


def test_separators_stay_in_place_and_do_not_change_the_digits() -> None:
    fmt = TokenFormat(keep_first=6, keep_last=4)
    plain = tokenize(engine(fmt), fmt, CARD, b"")
    spaced = tokenize(engine(fmt), fmt, "4111 1111 1111 1111", b"")
    dashed = tokenize(engine(fmt), fmt, "4111-1111-1111-1111", b"")
    assert spaced == f"{plain[:4]} {plain[4:8]} {plain[8:12]} {plain[12:]}"
    assert dashed == spaced.replace(" ", "-")
    assert detokenize(engine(fmt), fmt, dashed, b"") == "4111-1111-1111-1111"


def test_deterministic_and_the_tweak_separates() -> None:
    fmt = TokenFormat(keep_last=4, luhn=Luhn.VALID)
    ff1 = engine(fmt)
    a = context_tweak({"tenant": "a"}, None)
    b = context_tweak({"tenant": "b"}, None)
    assert len(a) == 32 and a != b
    assert tokenize(ff1, fmt, CARD, a) == tokenize(ff1, fmt, CARD, a)
    assert tokenize(ff1, fmt, CARD, a) != tokenize(ff1, fmt, CARD, b)
    assert tokenize(ff1, fmt, CARD, a) != tokenize(ff1, fmt, CARD, b"")
    # The wrong tweak gives another (Luhn-valid) card number, not the value.
    assert detokenize(ff1, fmt, tokenize(ff1, fmt, CARD, a), b) != CARD


def test_context_tweak_rule() -> None:
    assert context_tweak(None, None) == b"" == context_tweak({}, None)
    assert context_tweak(None, b"\x01\x02") == b"\x01\x02"
    # Key order does not matter: the context is canonical JSON before hashing.
    assert context_tweak({"a": "1", "b": "2"}, None) == context_tweak({"b": "2", "a": "1"}, None)
    with pytest.raises(InvalidRequest, match="either tweak or context"):
        context_tweak({"a": "1"}, b"x")
    with pytest.raises(InvalidRequest, match="at most 32 bytes"):
        context_tweak(None, bytes(33))


@pytest.mark.parametrize(
    ("fmt", "value"),
    [
        (TokenFormat(keep_first=6, keep_last=4, luhn=Luhn.VALID), CARD),  # 6 middle digits, one fixed: 10^5
        (TokenFormat(keep_first=6, keep_last=4, luhn=Luhn.INVALID), CARD),
        (TokenFormat(keep_first=6, keep_last=4), "411111111111111"),  # 5 middle digits: 10^5
        (TokenFormat(), "12345"),
        (TokenFormat(alphabet=TokenAlphabet.ALPHANUMERIC, keep_first=2), "ab1c9"),  # 36^3
    ],
)
def test_domain_rule_refuses_small_domains_naming_the_rule(fmt: TokenFormat, value: str) -> None:
    with pytest.raises(InvalidRequest, match="domain rule") as caught:
        tokenize(engine(fmt), fmt, value, b"")
    assert value not in caught.value.message
    with pytest.raises(InvalidRequest, match="domain rule"):
        check_value(fmt, value)


def test_domain_rule_boundaries_accepted() -> None:
    for fmt, value in [
        (TokenFormat(keep_first=6, keep_last=4), CARD),  # exactly 10^6
        (TokenFormat(keep_first=5, keep_last=4, luhn=Luhn.VALID), CARD),  # 7 middle, one fixed: 10^6
        (TokenFormat(alphabet=TokenAlphabet.ALPHANUMERIC), "ab1c"),  # 36^4
    ]:
        assert detokenize(engine(fmt), fmt, tokenize(engine(fmt), fmt, value, b""), b"") == value


def test_luhn_rules_refuse_what_they_cannot_carry() -> None:
    valid = TokenFormat(keep_last=4, luhn=Luhn.VALID)
    with pytest.raises(InvalidRequest, match="must pass the Luhn check"):
        tokenize(engine(valid), valid, "4111111111111112", b"")
    with pytest.raises(InvalidRequest, match="not a token of this key"):
        check_token(valid, "4111111111111112")
    invalid = TokenFormat(keep_last=4, luhn=Luhn.INVALID)
    token = tokenize(engine(invalid), invalid, CARD, b"")
    check_token(invalid, token)
    with pytest.raises(InvalidRequest, match="not a token of this key"):
        detokenize(engine(invalid), invalid, CARD, b"")  # a card number is never a token


@pytest.mark.parametrize(
    ("fmt", "value", "rule"),
    [
        (TokenFormat(), "4111x11111111111", "only the characters '0123456789'"),
        (TokenFormat(alphabet=TokenAlphabet.ALPHANUMERIC), "ABCDEFGH", "only the characters"),
        (TokenFormat(), "1" * 65, "at most 64 characters"),
    ],
)
def test_bad_values_refused_without_echoing_them(fmt: TokenFormat, value: str, rule: str) -> None:
    with pytest.raises(InvalidRequest, match=rule) as caught:
        tokenize(engine(fmt), fmt, value, b"")
    assert value not in caught.value.message


def test_parse_token_format() -> None:
    fmt = TokenFormat.parse({"alphabet": "digits", "keep_first": 0, "keep_last": 4, "luhn": "valid"})
    assert fmt == TokenFormat(TokenAlphabet.DIGITS, 0, 4, Luhn.VALID)
    assert TokenFormat.parse(fmt.to_json()) == fmt
    assert TokenFormat.parse({}) == TokenFormat()


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        ({"keep_first": 7}, "keep_first is an integer from 0 to 6"),
        ({"keep_last": 5}, "keep_last is an integer from 0 to 4"),
        ({"keep_last": True}, "keep_last"),
        ({"keep_first": "2"}, "keep_first"),
        ({"alphabet": "hex"}, "alphabet is"),
        ({"luhn": "maybe"}, "luhn is"),
        ({"alphabet": "alphanumeric", "luhn": "valid"}, "needs the 'digits' alphabet"),
        ({"radix": 10}, "unknown fields: radix"),
    ],
)
def test_parse_refuses_bad_formats(raw: dict[str, object], rule: str) -> None:
    with pytest.raises(InvalidRequest, match=rule):
        TokenFormat.parse(raw)
