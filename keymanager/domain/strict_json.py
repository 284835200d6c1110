"""JSON as every door reads it: an object that names one key twice is refused, at any depth.

Python's ``json.loads`` keeps the last of two equal keys, so a policy statement with
``"Effect": "Deny"`` then ``"Effect": "Allow"`` would be read as Allow while another reader (or
the person who wrote it) sees Deny; IAM refuses such documents and so does every door here. This
is the one decoder of request bodies and policy documents: the native REST API (FastAPI and the
fast path), the KMS door and PutKeyPolicy call :func:`loads`, each turning :class:`DuplicateKey`
into its protocol's refusal.
"""

from __future__ import annotations

import json
from typing import Any

_SHOWN_KEY_CHARS = 64


class DuplicateKey(ValueError):
    """A JSON object of the document names the same key twice; the message names the key (cut short)."""


def loads(document: str | bytes) -> Any:
    """The value of JSON ``document`` as :func:`json.loads` reads it; :class:`DuplicateKey` for an
    object naming a key twice, ValueError (``json.JSONDecodeError``, ``UnicodeDecodeError``) for
    anything that is not JSON."""
    return json.loads(document, object_pairs_hook=_object)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise DuplicateKey(f"a JSON object names the key {_repeated(pairs)[:_SHOWN_KEY_CHARS]!r} twice")
    return value


def _repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return ""
