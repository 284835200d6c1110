"""Format-preserving tokens (``FF1_AES_256`` keys): the calls, and the methods both clients inherit.

``km.tokenize("cards", "4111111111111111", context={"column": "pan"})`` gives a :class:`Token`
(same length, kept characters in clear, deterministic per key version and context);
``km.detokenize("cards", token.token, context=…, key_version=token.key_version)`` gives the
value back. ``tweak`` (0-32 bytes) is exclusive with ``context``. Batches go 1,000 items per
request, one result or one :class:`APIError` per item, in order.
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from keymanager_sdk._core import BatchResult, Call, PolicyArg, _batch_results, _json_parser, _path
from keymanager_sdk._models import Context, Key, context_json, policy_json

T = TypeVar("T")
BATCH_ITEMS = 1000


@dataclass(frozen=True)
class Token:
    token: str
    key_id: str
    key_version: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Token:
        return cls(str(data["token"]), str(data["key_id"]), int(data["key_version"]))


def _item(field: str, text: str, context: Context | None, tweak: bytes | None) -> dict[str, Any]:
    item: dict[str, Any] = {field: text}
    if context is not None:
        item["context"] = context_json(context)
    if tweak is not None:
        item["tweak"] = b64encode(tweak).decode()
    return item


def tokenize_call(key: str, value: str, context: Context | None, tweak: bytes | None) -> Call[Token]:
    body = _item("value", value, context, tweak)
    return Call(
        "POST", _path("keys", key, "tokenize"), _json_parser(Token.from_json), json=body, retryable=True, key=key
    )


def detokenize_call(
    key: str, token: str, context: Context | None, tweak: bytes | None, key_version: int | None
) -> Call[str]:
    body = _item("token", token, context, tweak)
    if key_version is not None:
        body["key_version"] = key_version
    parse = _json_parser(lambda d: str(d["value"]))
    return Call("POST", _path("keys", key, "detokenize"), parse, json=body, retryable=True, key=key)


def tokenize_batches(key: str, values: Iterable[str], context: Context | None) -> Iterator[Call[BatchResult[Token]]]:
    parse = _json_parser(_batch_results(Token.from_json))
    for chunk in _chunks(values):
        body = {"items": [_item("value", v, context, None) for v in chunk]}
        yield Call("POST", _path("keys", key, "tokenize", "batch"), parse, json=body, retryable=True, key=key)


def detokenize_batches(
    key: str, tokens: Iterable[str], context: Context | None, key_version: int | None
) -> Iterator[Call[BatchResult[str]]]:
    parse = _json_parser(_batch_results(lambda d: str(d["value"])))
    for chunk in _chunks(tokens):
        body: dict[str, Any] = {"items": [_item("token", t, context, None) for t in chunk]}
        if key_version is not None:
            body["key_version"] = key_version
        yield Call("POST", _path("keys", key, "detokenize", "batch"), parse, json=body, retryable=True, key=key)


def create_token_key_call(
    name: str, token_format: Mapping[str, Any], policy: PolicyArg, description: str | None, origin: str | None
) -> Call[Key]:
    body: dict[str, Any] = {"name": name, "algorithm": "FF1_AES_256", "token_format": dict(token_format)}
    body["policy"] = policy_json(policy)
    if description is not None:
        body["description"] = description
    if origin is not None:
        body["origin"] = origin
    return Call("POST", "/v1/keys", _json_parser(Key.from_json), json=body)


def _chunks(items: Iterable[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == BATCH_ITEMS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class TokenMethods:
    """Token methods of :class:`~keymanager_sdk.KeyManager`."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    def create_token_key(
        self,
        name: str,
        token_format: Mapping[str, Any],
        policy: PolicyArg = None,
        description: str | None = None,
        origin: str | None = None,
    ) -> Key:
        """Create an ``FF1_AES_256`` key with ``token_format`` (alphabet, keep_first, keep_last, luhn)."""
        return self._run(create_token_key_call(name, token_format, policy, description, origin))

    def tokenize(self, key: str, value: str, context: Context | None = None, tweak: bytes | None = None) -> Token:
        """The token of ``value`` under the key's primary version."""
        return self._run(tokenize_call(key, value, context, tweak))

    def detokenize(
        self,
        key: str,
        token: str,
        context: Context | None = None,
        tweak: bytes | None = None,
        key_version: int | None = None,
    ) -> str:
        """The value of ``token`` under ``key_version`` (default: the key's primary version)."""
        return self._run(detokenize_call(key, token, context, tweak, key_version))

    def tokenize_batch(self, key: str, values: Iterable[str], context: Context | None = None) -> BatchResult[Token]:
        """Tokens of ``values``, 1,000 per request; a refused value gives its APIError, in order."""
        return [r for call in tokenize_batches(key, values, context) for r in self._run(call)]

    def detokenize_batch(
        self, key: str, tokens: Iterable[str], context: Context | None = None, key_version: int | None = None
    ) -> BatchResult[str]:
        """Values of ``tokens`` (all of one key version), 1,000 per request, in order."""
        return [r for call in detokenize_batches(key, tokens, context, key_version) for r in self._run(call)]


class AsyncTokenMethods:
    """Token methods of :class:`~keymanager_sdk.AsyncKeyManager` (as :class:`TokenMethods`, awaited)."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    async def create_token_key(
        self,
        name: str,
        token_format: Mapping[str, Any],
        policy: PolicyArg = None,
        description: str | None = None,
        origin: str | None = None,
    ) -> Key:
        """Create an ``FF1_AES_256`` key with ``token_format``."""
        return await self._run(create_token_key_call(name, token_format, policy, description, origin))

    async def tokenize(self, key: str, value: str, context: Context | None = None, tweak: bytes | None = None) -> Token:
        """The token of ``value`` under the key's primary version."""
        return await self._run(tokenize_call(key, value, context, tweak))

    async def detokenize(
        self,
        key: str,
        token: str,
        context: Context | None = None,
        tweak: bytes | None = None,
        key_version: int | None = None,
    ) -> str:
        """The value of ``token`` under ``key_version`` (default: the key's primary version)."""
        return await self._run(detokenize_call(key, token, context, tweak, key_version))

    async def tokenize_batch(
        self, key: str, values: Iterable[str], context: Context | None = None
    ) -> BatchResult[Token]:
        """Tokens of ``values``, 1,000 per request, in order."""
        return [r for call in tokenize_batches(key, values, context) for r in await self._run(call)]

    async def detokenize_batch(
        self, key: str, tokens: Iterable[str], context: Context | None = None, key_version: int | None = None
    ) -> BatchResult[str]:
        """Values of ``tokens`` (all of one key version), 1,000 per request, in order."""
        return [r for call in detokenize_batches(key, tokens, context, key_version) for r in await self._run(call)]
