"""The one JSON decoder of request bodies and policy documents: duplicate keys refused at any depth,
non-finite numbers, and nesting deeper than 64 before decoding."""

from __future__ import annotations

import json

import pytest

from keymanager.domain import strict_json


def test_reads_json_as_json_loads_does() -> None:
    document = '{"a": [1, {"b": null, "c": "\\u00e9"}], "d": {"a": 2}}'
    assert strict_json.loads(document) == json.loads(document)
    assert strict_json.loads(document.encode()) == json.loads(document)


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ('{"a": 1, "a": 1}', "a"),
        ('{"x": {"Effect": "Deny", "Effect": "Allow"}}', "Effect"),
        ('[{"ok": 1}, [{"k": 1, "j": 2, "k": 3}]]', "k"),
        ('{"\\u0061": 1, "a": 2}', "a"),  # the same key, escaped
    ],
)
def test_an_object_naming_a_key_twice_is_refused_at_any_depth(document: str, key: str) -> None:
    with pytest.raises(strict_json.DuplicateKey) as refused:
        strict_json.loads(document)
    assert str(refused.value) == f"a JSON object names the key {key!r} twice"


def test_the_key_named_is_cut_short_and_not_json_is_a_value_error() -> None:
    with pytest.raises(strict_json.DuplicateKey) as refused:
        strict_json.loads(json.dumps({"k" * 1000: 1})[:-1] + ", " + json.dumps("k" * 1000) + ": 2}")
    assert len(str(refused.value)) < 120
    with pytest.raises(ValueError):
        strict_json.loads(b"{")


def nested(levels: int, inner: str = "1") -> str:
    """Arrays and objects in turn, ``levels`` deep."""
    opening = "".join("[" if n % 2 == 0 else '{"k": ' for n in range(levels))
    return opening + inner + "".join("]" if n % 2 == 0 else "}" for n in reversed(range(levels)))


@pytest.mark.parametrize("levels", [1, 2, 63, 64])
def test_nesting_up_to_the_bound_is_read(levels: int) -> None:
    document = nested(levels)
    assert strict_json.loads(document) == json.loads(document)
    assert strict_json.loads(document.encode("utf-16")) == json.loads(document)


@pytest.mark.parametrize("levels", [65, 66, 1000, 30_000])
def test_nesting_deeper_than_the_bound_is_refused_before_decoding(levels: int) -> None:
    """30,000 levels raised RecursionError in ``json.loads`` (a 500 on every door)."""
    for document in (nested(levels), "[" * levels, "[" * levels + "]" * levels):
        for form in (document, document.encode(), document.encode("utf-16"), document.encode("utf-32")):
            with pytest.raises(strict_json.TooDeep, match="nested deeper than 64"):
                strict_json.loads(form)


@pytest.mark.parametrize(
    "document",
    [
        '{"a": "' + "[" * 100 + '"}',  # brackets in strings are text
        '["\\"[[[[", ' + "[" * 60 + "]" * 60 + "]",  # behind an escaped quote
        '["\\\\", "[[[[", ' + "[" * 62 + "]" * 62 + "]",  # after an escaped backslash
        '["\u00e9[" , "\u4e2d{{{{", ' + "[" * 62 + "]" * 62 + "]",  # beside characters of several bytes
        "[" + ", ".join(["[[1]]"] * 500) + "]",  # many shallow brackets
    ],
)
def test_brackets_inside_strings_and_many_shallow_ones_are_no_depth(document: str) -> None:
    assert strict_json.loads(document) == json.loads(document)
    assert strict_json.loads(document.encode()) == json.loads(document)


def test_a_string_quote_in_another_encoding_hides_no_brackets() -> None:
    """In UTF-16, U+0122 holds the byte of a quote: the depth is counted on the text, not its bytes."""
    document = '["\u0122", ' + "[" * 1000 + "]" * 1000 + '] "'
    with pytest.raises(strict_json.TooDeep):
        strict_json.loads(document.encode("utf-16-le"))


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused(constant: str) -> None:
    with pytest.raises(strict_json.NonFinite, match=constant):
        strict_json.loads(f'{{"n": {constant}}}')
    assert issubclass(strict_json.NonFinite, strict_json.Refused)
    assert issubclass(strict_json.TooDeep, strict_json.Refused) and issubclass(strict_json.Refused, ValueError)
