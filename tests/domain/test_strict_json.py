"""The one JSON decoder of request bodies and policy documents: duplicate keys refused at any depth."""

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
