"""Format-preserving tokens with ``FF1_AES_256`` keys: policy, key state and versions around the HSM's FF1.

Tokenize uses the key's primary version; detokenize the version the caller names (default: the
primary one, so after a rotation old tokens need their ``key_version``). The tweak comes from
the request's ``tweak`` or ``context`` (see :func:`keymanager.domain.tokens.context_tweak`).
Nothing here logs or returns a value or a token in an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from keymanager.domain.models import Key, KeyVersion, Principal
from keymanager.domain.policy import Operation
from keymanager.domain.tokens import TokenFormat, context_tweak
from keymanager.errors import (
    InvalidRequest,
    KeyManagerError,
    PayloadTooLarge,
    VersionBelowMinimum,
)
from keymanager.hsm import Hsm, tokenization
from keymanager.services.key_use import usable
from keymanager.services.snapshot import KeyLookup

Context = Mapping[str, str] | None


@dataclass(frozen=True)
class TokenRequest:
    """One value (or token) with its context or explicit tweak (exclusive)."""

    text: str
    context: Context = None
    tweak: bytes | None = None


@dataclass(frozen=True)
class Tokenized:
    """A token, or a detokenized value, and the key version that made it."""

    text: str
    key_id: str
    key_version: int


@dataclass(frozen=True)
class TokenBatch:
    results: list[Tokenized | KeyManagerError]
    key_id: str
    key_version: int


class TokenService:
    """Tokenize and detokenize with ``FF1_AES_256`` keys whose policy allows the principal."""

    def __init__(self, hsm: Hsm, *, max_batch_items: int = 1000) -> None:
        self._hsm = hsm
        self._max_batch = max_batch_items

    async def tokenize(self, snapshot: KeyLookup, principal: Principal, ref: str, item: TokenRequest) -> Tokenized:
        """The token of ``item.text`` under the primary version of key ``ref``."""
        key, fmt = _usable(await snapshot.key(ref), principal, Operation.TOKENIZE)
        version = key.versions[key.primary_version]
        tweak = context_tweak(item.context, item.tweak)
        token = await tokenization.atokenize(self._hsm, version.hsm, fmt, item.text, tweak)
        return Tokenized(token, key.id, version.version)

    async def detokenize(
        self, snapshot: KeyLookup, principal: Principal, ref: str, item: TokenRequest, version: int | None = None
    ) -> Tokenized:
        """The value of token ``item.text`` under ``version`` (default: primary) of key ``ref``."""
        key, fmt = _usable(await snapshot.key(ref), principal, Operation.DETOKENIZE)
        chosen = _version(key, version)
        tweak = context_tweak(item.context, item.tweak)
        value = await tokenization.adetokenize(self._hsm, chosen.hsm, fmt, item.text, tweak)
        return Tokenized(value, key.id, chosen.version)

    async def tokenize_batch(
        self, snapshot: KeyLookup, principal: Principal, ref: str, items: Sequence[TokenRequest | KeyManagerError]
    ) -> TokenBatch:
        """:meth:`tokenize` of each item in one trip to the HSM; a refused item gives its error, in order."""
        self._check_batch(items)
        key, fmt = _usable(await snapshot.key(ref), principal, Operation.TOKENIZE)
        return await self._batch(key, fmt, key.versions[key.primary_version], items, forward=True)

    async def detokenize_batch(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        items: Sequence[TokenRequest | KeyManagerError],
        version: int | None = None,
    ) -> TokenBatch:
        """:meth:`detokenize` of each item (all under one version) in one trip to the HSM.

        An item given as an error (e.g. bad base64, found by the caller) stays that error.
        """
        self._check_batch(items)
        key, fmt = _usable(await snapshot.key(ref), principal, Operation.DETOKENIZE)
        return await self._batch(key, fmt, _version(key, version), items, forward=False)

    async def _batch(
        self,
        key: Key,
        fmt: TokenFormat,
        version: KeyVersion,
        items: Sequence[TokenRequest | KeyManagerError],
        *,
        forward: bool,
    ) -> TokenBatch:
        prepared: list[tuple[str, bytes] | KeyManagerError] = []
        for item in items:
            try:
                if isinstance(item, KeyManagerError):
                    raise item
                prepared.append((item.text, context_tweak(item.context, item.tweak)))
            except KeyManagerError as exc:
                prepared.append(exc)
        run = tokenization.atokenize_many if forward else tokenization.adetokenize_many
        done = iter(await run(self._hsm, version.hsm, fmt, [p for p in prepared if not isinstance(p, KeyManagerError)]))
        results: list[Tokenized | KeyManagerError] = []
        for entry in prepared:
            outcome = entry if isinstance(entry, KeyManagerError) else next(done)
            results.append(
                outcome if isinstance(outcome, KeyManagerError) else Tokenized(outcome, key.id, version.version)
            )
        return TokenBatch(results, key.id, version.version)

    def _check_batch(self, items: Sequence[object]) -> None:
        if len(items) > self._max_batch:
            raise PayloadTooLarge(f"a batch holds at most {self._max_batch} items")


def _usable(key: Key, principal: Principal, operation: Operation) -> tuple[Key, TokenFormat]:
    """``key`` and its token format if ``principal`` may use it for ``operation`` now; else the refusal."""
    usable(key, principal, operation)
    assert key.token_format is not None  # usable() refuses an FF1 key without one
    return key, key.token_format


def _version(key: Key, number: int | None) -> KeyVersion:
    chosen = key.version(key.primary_version if number is None else number)
    if chosen is None:
        raise InvalidRequest("the key has no such version")
    if chosen.version < key.min_decryption_version:
        raise VersionBelowMinimum()
    return chosen
