"""JSON as every door reads it: an object that names one key twice, a non-finite number, or
nesting deeper than :data:`MAX_DEPTH` is refused, at any depth.

Python's ``json.loads`` keeps the last of two equal keys, so a policy statement with
``"Effect": "Deny"`` then ``"Effect": "Allow"`` would be read as Allow while another reader (or
the person who wrote it) sees Deny; IAM refuses such documents and so does every door here. It
also takes ``NaN`` and ``Infinity``, which JSON (RFC 8259) has not, and recurses once per level
of nesting (30,000 levels raise ``RecursionError``). This is the one decoder of request bodies
and policy documents: the native REST API (FastAPI and the fast path), the KMS door, the XKS
door and PutKeyPolicy call :func:`loads`, each turning a :class:`Refused` into its protocol's
refusal.

The depth is checked before decoding, at almost no cost for the usual body: a document with at
most :data:`MAX_DEPTH` opening brackets cannot nest deeper (two ``str.count``); only one with more
is scanned (:func:`_deeper_than`: its brackets outside strings counted, mostly at C speed).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, NoReturn

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a document may have (a request body needs about 4)."""
_SHOWN_KEY_CHARS = 64
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_BUT_QUOTES_AND_BRACKETS = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_SQUARE = bytes.maketrans(b"{}", b"[]")
"""Objects' braces as arrays' brackets: depth does not ask which is which."""
_STEP = [0] * 256
_STEP[ord("[")], _STEP[ord("]")] = 1, -1


class Refused(ValueError):
    """The document is JSON of a kind no door takes; the message says which (without its values)."""


class DuplicateKey(Refused):
    """A JSON object of the document names the same key twice; the message names the key (cut short)."""


class NonFinite(Refused):
    """The document holds ``NaN``, ``Infinity`` or ``-Infinity``, which are not JSON."""


class TooDeep(Refused):
    """The document nests arrays and objects deeper than :data:`MAX_DEPTH`."""


def loads(document: str | bytes) -> Any:
    """The value of JSON ``document`` as :func:`json.loads` reads it (bytes in UTF-8, -16 or -32,
    as it detects them).

    Raises :class:`TooDeep` (before decoding), :class:`DuplicateKey`, :class:`NonFinite`; ValueError
    (``json.JSONDecodeError``, ``UnicodeDecodeError``) for anything that is not JSON.
    """
    utf8: bytes | None = None
    if isinstance(document, str):
        text = document
    else:
        encoding = json.detect_encoding(document)
        text = document.decode(encoding, "surrogatepass")
        utf8 = document if encoding.startswith("utf-8") else None
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(
        MAX_DEPTH, utf8 or text.encode("utf-8", "surrogatepass")
    ):
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels")
    return _DECODER.decode(text)


def _deeper_than(limit: int, utf8: bytes) -> bool:
    """Whether the arrays and objects of ``utf8`` (JSON in UTF-8, whose bytes of non-ASCII
    characters are never ASCII) nest deeper than ``limit`` outside its strings.

    For a text that is not JSON, true at least when a decoder would go deeper before it finds it
    is not: up to its first error the text is JSON, whose quotes, once its escapes are dropped,
    each open or close a string. All but quotes and brackets dropped, two quotes side by side
    bound no bracket, and dropping them keeps every other quote's side: the strings of a request
    body go at C speed, and only strings holding brackets are left to split. Then each round
    drops the innermost pairs (braces read as brackets), exactly one level: a balanced nesting of
    ``limit`` levels is gone after ``limit`` rounds; anything else is counted bracket by bracket.
    """
    if b"\\" in utf8:  # escapes (only in strings) dropped, so that every quote left bounds a string
        utf8 = _ESCAPE.sub(b"", utf8)
    brackets = utf8.translate(_SQUARE, _BUT_QUOTES_AND_BRACKETS).replace(b'""', b"")
    if b'"' in brackets:
        brackets = b"".join(brackets.split(b'"')[::2])
    left = brackets
    for _ in range(limit):
        inner = left.replace(b"[]", b"")
        if not inner:
            return False
        if inner == left:  # not a balanced nesting
            break
        left = inner
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def _non_finite(constant: str) -> NoReturn:
    raise NonFinite(f"{constant} is not a JSON number")


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


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_constant=_non_finite)
"""Made once: ``json.loads`` with a hook makes one per call."""
