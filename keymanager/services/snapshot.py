"""Cached principals and keys for the hot path, and the rule that keeps them honest.

Looking up a principal and a key in the database costs more than the encryption itself, so
each process caches them. Every change to a principal or key increments the metadata version
in the same transaction (see ``Store``). A request reads through a :class:`Snapshot` that
knows the version its cache was filled under; its audit record is committed only if that
version is still current (see ``AuditLog``). If it is not, the request runs again on fresh
reads. And a refusal read from the cache is always checked again against the database
before it is answered. So a change made through any replica or worker applies to every
request that commits after it: caching never lets a disabled key or a deleted token through.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from keymanager.db import Store
from keymanager.domain.access_keys import AccessKey
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credentials import token_hash
from keymanager.domain.models import Key, Principal
from keymanager.errors import KeyManagerError, KeyMaterialMissing, KeyNotFound, Unauthenticated
from keymanager.services.audit import AuditLog, StaleMetadata

T = TypeVar("T")
ATTEMPTS = 3
MAX_ACCESS_KEYS = 4096


class MetadataCache:
    """This process's principals (by token hash and certificate subject) and keys (by id and name)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._version: int | None = None
        self._principals: dict[str, Principal | None] = {}
        self._keys: dict[str, Key | None] = {}
        self._access_keys: dict[str, AccessKey | None] = {}  # the AWS KMS API's (services/access_keys.py)

    def snapshot(self, *, fresh: bool) -> Snapshot:
        """A view for one attempt of one request: cached, or reading everything from the database."""
        return Snapshot(self, fresh=fresh)

    def clear(self) -> None:
        with self._lock:
            self._version = None
            self._principals.clear()
            self._keys.clear()
            self._access_keys.clear()

    def _cached(self, table: dict[str, T | None], name: str) -> tuple[bool, T | None, int | None]:
        with self._lock:
            if self._version is None or name not in table:
                return False, None, None
            return True, table[name], self._version

    def _remember(self, version: int, table: dict[str, T | None], names: list[str], value: T | None) -> None:
        with self._lock:
            if self._version != version:
                self._version = version
                self._principals.clear()
                self._keys.clear()
                self._access_keys.clear()
            for name in names:
                table[name] = value


class Snapshot:
    """Lookups of one attempt; ``version`` is what its audit commit must find current (None: unknown)."""

    def __init__(self, cache: MetadataCache, *, fresh: bool) -> None:
        self.cache = cache
        self.fresh = fresh
        self.version: int | None = None
        self._consistent = True

    async def principal_by_token(self, token: str) -> Principal:
        """The principal holding bearer ``token``; Unauthenticated otherwise."""
        found = await self._lookup(self.cache._principals, f"t:{token_hash(token)}", _by_token_hash)
        if found is None:
            raise Unauthenticated()
        return found

    async def principal_by_subject(self, subject: str) -> Principal:
        """The principal bound to a verified client certificate subject; Unauthenticated otherwise."""
        found = await self._lookup(self.cache._principals, f"s:{subject}", _by_subject)
        if found is None:
            raise Unauthenticated()
        return found

    async def key(self, ref: str) -> Key:
        """The key named or identified by ``ref``; KeyNotFound otherwise."""
        found = await self._lookup(self.cache._keys, ref, _key_by_ref)
        if found is None:
            raise KeyNotFound()
        return found

    async def access_key(self, access_key_id: str, load: Callable[[str], AccessKey | None]) -> AccessKey | None:
        """The access key ``access_key_id`` (``load`` reads it from the database); None when there is none.

        Unknown ids are remembered too, so the table is emptied when it reaches ``MAX_ACCESS_KEYS``
        (a flood of made-up ids costs database reads, never unbounded memory).
        """
        if len(self.cache._access_keys) >= MAX_ACCESS_KEYS:
            self.cache._access_keys.clear()
        return await self._lookup(self.cache._access_keys, access_key_id, lambda _store, name: load(name))

    @property
    def checkable_version(self) -> int | None:
        """The version the audit commit must find current, or None when this attempt cannot tell."""
        return self.version if self._consistent else -1

    async def _lookup(self, table: dict[str, T | None], name: str, load: Callable[[Store, str], T | None]) -> T | None:
        if not self.fresh:
            hit, value, version = self.cache._cached(table, name)
            if hit:
                self._note(version)
                return value
        store = self.cache._store
        loaded_version, loaded = await asyncio.to_thread(lambda: _load(store, name, load))
        self._note(loaded_version)
        self.cache._remember(loaded_version, table, _names(name, loaded), loaded)
        return loaded

    def _note(self, version: int | None) -> None:
        if self.version is None:
            self.version = version
        elif version != self.version:
            self._consistent = False  # lookups under two versions: the commit check will fail and retry


def _load(store: Store, name: str, load: Callable[[Store, str], T | None]) -> tuple[int, T | None]:
    version = store.metadata_version()  # read first: the value loaded next is at least this new
    return version, load(store, name)


def _names(name: str, value: object) -> list[str]:
    if isinstance(value, Key):
        return list({name, value.id, value.name})
    return [name]


def _by_token_hash(store: Store, name: str) -> Principal | None:
    return store.principal_by_token_hash(name.removeprefix("t:"))


def _by_subject(store: Store, name: str) -> Principal | None:
    return store.principal_by_cert_subject(name.removeprefix("s:"))


def _key_by_ref(store: Store, ref: str) -> Key | None:
    return store.get_key(ref)


async def run_validated(
    cache: MetadataCache,
    audit: AuditLog,
    attempt: Callable[[Snapshot], Awaitable[T]],
    entry: Callable[[T], AuditEntry],
) -> T:
    """Run ``attempt`` on cached lookups and commit its audit ``entry``; again on fresh reads when
    the cache turned out stale or the attempt refused (4xx): only a refusal on fresh reads is
    raised. Failures of the HSM or the database (5xx) are raised at once, never retried here."""
    for number in range(ATTEMPTS):
        snapshot = cache.snapshot(fresh=number > 0)
        try:
            result = await attempt(snapshot)
        except KeyManagerError as exc:
            # A refusal, or a key whose objects are gone (destroyed since it was cached), may
            # come from stale data; other failures of the HSM or the database are raised at once.
            if snapshot.fresh or (exc.status >= 500 and not isinstance(exc, KeyMaterialMissing)):
                raise
            continue
        last = number == ATTEMPTS - 1
        try:
            await audit.awrite(entry(result), None if last else snapshot.checkable_version)
        except StaleMetadata:
            cache.clear()
            continue
        return result
    raise AssertionError("unreachable: the last attempt commits unconditionally")
