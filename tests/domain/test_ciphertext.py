"""The ciphertext string: encode/parse round trip, strict parsing, canonical context."""

from __future__ import annotations

import base64
import random

import pytest

from keymanager.domain import ciphertext as ct
from keymanager.errors import DecryptionFailed, InvalidRequest

KEY_ID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("body", [b"", b"\x00", bytes(range(256)), b"x" * 80, b"y" * 81, b"z" * 82])
@pytest.mark.parametrize("version", [1, 2, 17, 999_999_999])
def test_encode_parse_round_trip(body: bytes, version: int) -> None:
    original = ct.Ciphertext(KEY_ID, version, body)
    text = original.encode()
    assert text.startswith(f"km:1:{KEY_ID}:{version}:")
    assert text.isprintable() and text.isascii()
    parsed = ct.parse(text)
    assert parsed == original
    assert parsed.encode() == text
    assert parsed.header == ct.header(KEY_ID, version) == f"km:1:{KEY_ID}:{version}:".encode()


def test_header_is_the_ciphertext_prefix() -> None:
    text = ct.Ciphertext(KEY_ID, 3, b"abc").encode()
    assert text.encode().startswith(ct.header(KEY_ID, 3))


# 19 bytes, so the base64 ends in "==" and holds both "+" and "/".
GOOD = ct.Ciphertext(KEY_ID, 1, b"\xfb\xef\xff0123456789abcdef").encode()
B64 = GOOD.rsplit(":", 1)[1]
assert B64.endswith("==") and "+" in B64 and "/" in B64


@pytest.mark.parametrize(
    "text",
    [
        "",
        "km",
        "km:1:",
        GOOD + " ",
        " " + GOOD,
        GOOD + "\n",
        GOOD.replace("km:", "KM:", 1),
        GOOD.replace("km:1:", "km:2:", 1),
        GOOD.replace("km:1:", "km:01:", 1),
        GOOD.replace(KEY_ID, KEY_ID.upper()),
        GOOD.replace(KEY_ID, KEY_ID[:-1]),
        GOOD.replace(KEY_ID, KEY_ID + "0"),
        GOOD.replace(f"{KEY_ID}:1:", f"{KEY_ID}:0:"),
        GOOD.replace(f"{KEY_ID}:1:", f"{KEY_ID}:01:"),
        GOOD.replace(f"{KEY_ID}:1:", f"{KEY_ID}:-1:"),
        GOOD.replace(f"{KEY_ID}:1:", f"{KEY_ID}:1234567890:"),
        GOOD.replace(f"{KEY_ID}:1:", f"{KEY_ID}::"),
        GOOD[:-1],  # one padding character removed
        GOOD.rstrip("="),  # all padding removed
        GOOD[:-2] + "=A",  # padding in the middle
        GOOD + "=",  # extra padding
        GOOD + "A",  # not a multiple of four
        GOOD[: -len(B64)] + B64[:4] + "\n" + B64[4:],  # whitespace inside the base64
        GOOD[: -len(B64)] + B64.replace("+", "-").replace("/", "_"),  # url-safe alphabet
        GOOD[: -len(B64)] + "A===",
        GOOD[: -len(B64)] + "é" + B64[1:],
        GOOD + ":extra",
    ],
)
def test_parse_rejects_every_deviation_with_decryption_failed(text: str) -> None:
    assert text != GOOD
    with pytest.raises(DecryptionFailed) as info:
        ct.parse(text)
    assert info.value.message == "decryption failed"
    assert info.value.code == "decryption_failed" and info.value.status == 400


def test_parse_rejects_non_canonical_base64() -> None:
    # "QR==" and "QQ==" both decode to b"A"; only the canonical spelling is accepted.
    assert base64.b64decode("QR==") == b"A"
    assert ct.parse(f"km:1:{KEY_ID}:1:QQ==").body == b"A"
    with pytest.raises(DecryptionFailed):
        ct.parse(f"km:1:{KEY_ID}:1:QR==")


@pytest.mark.parametrize("value", [None, 123, b"km:1:", ["km"]])
def test_parse_rejects_non_strings(value: object) -> None:
    with pytest.raises(DecryptionFailed):
        ct.parse(value)  # type: ignore[arg-type]


def test_decryption_failed_message_never_varies() -> None:
    messages = set()
    for text in ("", "km:1:", GOOD[:-1], GOOD.replace(KEY_ID, KEY_ID.upper())):
        with pytest.raises(DecryptionFailed) as info:
            ct.parse(text)
        messages.add(str(info.value))
    assert messages == {"decryption failed"}


def test_canonical_context_is_order_independent_compact_sorted_utf8() -> None:
    assert ct.canonical_context(None) == b""
    assert ct.canonical_context({}) == b""
    a = ct.canonical_context({"b": "2", "a": "1", "c": "3"})
    b = ct.canonical_context({"c": "3", "a": "1", "b": "2"})
    assert a == b == b'{"a":"1","b":"2","c":"3"}'
    assert ct.canonical_context({"name": "Zoë"}) == '{"name":"Zoë"}'.encode()
    assert ct.canonical_context({"a": "1"}) != ct.canonical_context({"a": "2"})
    assert ct.canonical_context({"a": "1"}) != ct.canonical_context({"A": "1"})


def test_mac_input_binds_the_context_length() -> None:
    head = ct.header(KEY_ID, 1)
    iv = b"i" * 16
    # Moving bytes between ciphertext and context changes the MAC input.
    assert ct.mac_input(head, iv, b"abc", b"d") != ct.mac_input(head, iv, b"ab", b"cd")
    data = ct.mac_input(head, iv, b"body", b"ctx")
    assert data == head + iv + b"body" + b"ctx" + (3).to_bytes(8, "big")


def test_gcm_aad_is_header_then_context() -> None:
    head = ct.header(KEY_ID, 2)
    assert ct.gcm_aad(head, b"") == head
    assert ct.gcm_aad(head, b'{"a":"1"}') == head + b'{"a":"1"}'


def test_a_context_utf8_cannot_carry_is_an_invalid_request() -> None:
    # json.loads lets a lone surrogate in through a "\ud800" escape; it must not become a 500.
    with pytest.raises(InvalidRequest):
        ct.canonical_context({"tenant": "\ud800"})


def _reference_parse(text: str) -> ct.Ciphertext | None:
    """The parser as first written (one regular expression, then a re-encoding): the rule ``ct.parse`` keeps."""
    import re

    match = re.fullmatch(r"km:1:([0-9a-f]{32}):([1-9][0-9]{0,8}):([A-Za-z0-9+/]*={0,2})", text)
    if match is None:
        return None
    try:
        body = base64.b64decode(match.group(3), validate=True)
    except ValueError:
        return None
    if base64.b64encode(body).decode() != match.group(3):
        return None
    return ct.Ciphertext(match.group(1), int(match.group(2)), body)


def test_parse_accepts_exactly_what_the_reference_parser_accepts() -> None:
    rng = random.Random(14)
    alphabet = "AQgw+/=:\n é-_" + KEY_ID
    for _ in range(20_000):
        text = ct.Ciphertext(KEY_ID, rng.choice((1, 12)), rng.randbytes(rng.randrange(8))).encode()
        for _ in range(rng.randrange(3)):
            at = rng.randrange(len(text) + 1)
            cut = rng.randrange(3)
            text = text[:at] + "".join(rng.choice(alphabet) for _ in range(rng.randrange(3))) + text[at + cut :]
        expected = _reference_parse(text)
        try:
            assert ct.parse(text) == expected, text
        except DecryptionFailed:
            assert expected is None, text


def test_a_context_is_at_most_8192_bytes_canonical() -> None:
    at_limit = {"k": "é" * ((ct.MAX_CONTEXT_BYTES - 8) // 2)}
    assert len(ct.canonical_context(at_limit)) == ct.MAX_CONTEXT_BYTES == 8192
    for over in ({"k": "x" * (ct.MAX_CONTEXT_BYTES - 7)}, {f"k{n:03d}": "v" for n in range(1000)}):
        with pytest.raises(InvalidRequest) as refused:
            ct.canonical_context(over)
        assert "8192 bytes" in refused.value.message
