"""Tags of keys as the AWS KMS API takes them (CreateKey's ``Tags``, TagResource, UntagResource): AWS's limits.

Pure, as :mod:`keymanager.domain.kms`, whose :class:`~keymanager.domain.kms.KmsError` it raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from keymanager.domain.kms import KmsError

MAX_TAGS = 50
MAX_TAG_KEY_CHARS = 128
MAX_TAG_VALUE_CHARS = 256


def tags(params: Mapping[str, Any], name: str = "Tags") -> dict[str, str]:
    """Field ``name``, a list of ``{"TagKey", "TagValue"}``, as a map; ``TagException`` for a tag
    AWS refuses (key 1-128 characters, not ``aws:``…; value 0-256 characters; a key twice)."""
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, list) or not all(isinstance(tag, dict) for tag in value):
        raise KmsError("SerializationException", f"{name} must be a list of tags")
    out: dict[str, str] = {}
    for tag in value:
        key, text = tag.get("TagKey"), tag.get("TagValue")
        if not isinstance(key, str) or not isinstance(text, str):
            raise KmsError("SerializationException", "a tag is {TagKey: string, TagValue: string}")
        check_tag_key(key)
        if len(text) > MAX_TAG_VALUE_CHARS:
            raise KmsError("TagException", f"a TagValue is at most {MAX_TAG_VALUE_CHARS} characters")
        if key in out:
            raise KmsError("TagException", f"the TagKey {key!r} is given twice")
        out[key] = text
    if len(out) > MAX_TAGS:
        raise KmsError("TagException", f"a key holds at most {MAX_TAGS} tags")
    return out


def check_tag_key(key: str) -> None:
    """``TagException`` unless ``key`` is a tag key AWS accepts."""
    if not 1 <= len(key) <= MAX_TAG_KEY_CHARS:
        raise KmsError("TagException", f"a TagKey is 1 to {MAX_TAG_KEY_CHARS} characters")
    if key.lower().startswith("aws:"):
        raise KmsError("TagException", "TagKeys beginning with aws: are reserved")
