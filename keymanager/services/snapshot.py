"""Cached principals and keys for the hot path, and the rule that keeps them honest.

Looking up a principal and a key in the database costs more than the encryption itself, so
each process caches them. Every change to a principal or key increments the metadata version
in the same transaction (see ``Store``). A request reads through a :class:`Snapshot` that
knows the version its cache was filled under; its audit record is committed only if that
version is still current (see ``AuditWriter``). If it is not, the request runs again on fresh
reads. A refusal that stale metadata could explain (authentication, policy, key state, key
version), read from the cache, stands only if the metadata version is still current;
otherwise the request runs again on fresh reads. So a change made through any replica or
worker applies to every request that commits after it: caching never lets a disabled key or
a deleted token through.

Strangers cannot grow the cache: only what exists is cached (an unknown token or key name
leaves nothing behind), and each table is a bounded LRU whose evictions are counted.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from keymanager.db import Store
from keymanager.domain.access_keys import AccessKey
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credentials import Credential
from keymanager.domain.models import Door, Key, Principal
from keymanager.errors import (
    Forbidden,
    KeyDestroyed,
    KeyDisabled,
    KeyManagerError,
    KeyMaterialMissing,
    KeyNotFound,
    KeyPendingDeletion,
    KeyPendingImport,
    Unauthenticated,
    UnknownKeyVersion,
    VersionBelowMinimum,
)
from keymanager.services.audit import StaleMetadata
from keymanager.services.audit_log import AuditLog
from keymanager.services.authorization import admits

T = TypeVar("T")
ATTEMPTS = 3
STALE_EXPLAINABLE = (
    Unauthenticated,
    Forbidden,
    KeyDisabled,
    KeyPendingDeletion,
    KeyPendingImport,
    KeyDestroyed,
    VersionBelowMinimum,
    UnknownKeyVersion,
    KeyMaterialMissing,
)
"""Refusals that metadata changed behind the cache could explain (a key object missing from the
token included: the key may have been destroyed meanwhile). Anything else stands as it is."""


class KeyLookup(Protocol):
    """Where the services find the keys a request names: a :class:`Snapshot` (through the cache, or
    with ``fresh=True`` reading the database) is one; every cryptographic operation takes one."""

    async def key(self, ref: str) -> Key:
        """The key named or identified by ``ref``; KeyNotFound otherwise."""
        ...


class StaleSnapshot(Exception):
    """Raised by :meth:`Snapshot.confirm_current`: the attempt must run again on fresh reads."""


CacheObserver = Callable[[str, int, int], None]
"""Called with (table, entries, evicted just now) after a table changed."""


class _Table(Generic[T]):
    """One LRU table of at most ``limit`` entries (callers hold the cache's lock)."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.entries: OrderedDict[str, T] = OrderedDict()
        self.evictions = 0

    def get(self, name: str) -> T | None:
        value = self.entries.get(name)
        if value is not None:
            self.entries.move_to_end(name)
        return value

    def put(self, names: list[str], value: T) -> int:
        """Remember ``value`` under ``names``; how many entries were evicted to make room."""
        for name in names:
            self.entries[name] = value
            self.entries.move_to_end(name)
        evicted = 0
        while len(self.entries) > self.limit:
            self.entries.popitem(last=False)
            evicted += 1
        self.evictions += evicted
        return evicted


class MetadataCache:
    """This process's principals (by credential) and keys (by id and name), each table bounded."""

    def __init__(
        self,
        store: Store,
        *,
        max_principals: int = 10_000,
        max_keys: int = 10_000,
        max_access_keys: int = 4096,
        client_tokens: Callable[[str], Principal | None] | None = None,
    ) -> None:
        """``client_tokens``: the principal of a token hash no principal's bearer token has (the Transit
        door's AppRole client tokens, ``db/transit.py``), if any."""
        self._store = store
        self._client_tokens = client_tokens
        self._lock = threading.Lock()
        self._version: int | None = None
        self._principals: _Table[Principal] = _Table("principals", max_principals)
        self._keys: _Table[Key] = _Table("keys", max_keys)
        self._access_keys: _Table[AccessKey] = _Table("access_keys", max_access_keys)  # the AWS KMS API's
        self.observer: CacheObserver | None = None

    def snapshot(self, *, fresh: bool) -> Snapshot:
        """A view for one attempt of one request: cached, or reading everything from the database."""
        return Snapshot(self, fresh=fresh)

    def clear(self) -> None:
        with self._lock:
            self._version = None
            self._principals.entries.clear()
            self._keys.entries.clear()
            self._access_keys.entries.clear()
        self._observe(self._principals, 0)
        self._observe(self._keys, 0)
        self._observe(self._access_keys, 0)

    def knows(self, credential: Credential) -> bool:
        """Whether ``credential`` belongs to a principal in the cache (no database read)."""
        with self._lock:
            return self._version is not None and credential.cache_name in self._principals.entries

    def key_id(self, ref: str) -> str | None:
        """The id of the cached key named or identified by ``ref`` (no database read; ids never change)."""
        with self._lock:
            key = self._keys.entries.get(ref)
        return None if key is None else key.id

    def sizes(self) -> dict[str, int]:
        """Entries per table."""
        with self._lock:
            return {t.name: len(t.entries) for t in (self._principals, self._keys, self._access_keys)}

    def evictions(self) -> dict[str, int]:
        """Entries evicted per table since the process started."""
        with self._lock:
            return {t.name: t.evictions for t in (self._principals, self._keys, self._access_keys)}

    async def is_current(self, version: int | None) -> bool:
        """Whether ``version`` is still the database's metadata version (one read)."""
        if version is None:
            return False
        return await asyncio.to_thread(self._store.metadata_version) == version

    def _cached(self, table: _Table[Any], name: str) -> tuple[Any, int | None]:
        with self._lock:
            if self._version is None:
                return None, None
            return table.get(name), self._version

    def _remember(self, version: int, table: _Table[T], names: list[str], value: T) -> None:
        with self._lock:
            if self._version != version:
                self._version = version
                self._principals.entries.clear()
                self._keys.entries.clear()
                self._access_keys.entries.clear()
            evicted = table.put(names, value)
        self._observe(table, evicted)

    def _observe(self, table: _Table[T], evicted: int) -> None:
        if self.observer is not None:
            self.observer(table.name, len(table.entries), evicted)


class Snapshot:
    """Lookups of one attempt; ``version`` is what its audit commit must find current (None: unknown)."""

    def __init__(self, cache: MetadataCache, *, fresh: bool) -> None:
        self.cache = cache
        self.fresh = fresh
        self.version: int | None = None
        """The metadata version of the first lookup (None before any)."""
        self.used_cache = False
        """Whether a lookup was answered from the cache (else every one read the database)."""
        self.mixed = False
        """Whether lookups were answered under two metadata versions: then no single version can be
        checked at the audit commit, and the attempt runs again on fresh reads."""

    async def principal(self, credential: Credential) -> Principal:
        """The principal holding ``credential``; Unauthenticated otherwise."""
        table, name = self.cache._principals, credential.cache_name
        found = self._hit(table, name)
        if found is None:
            found = await self._load(table, name, lambda s: _principal(s, credential, self.cache._client_tokens))
            if found is None:
                raise Unauthenticated()
        return found

    async def key(self, ref: str) -> Key:
        """The key named or identified by ``ref``; KeyNotFound otherwise."""
        table = self.cache._keys
        found = self._hit(table, ref)
        if found is None:
            found = await self._load(table, ref, lambda s: s.get_key(ref))
            if found is None:
                raise KeyNotFound()
        return found

    async def access_key(self, access_key_id: str, load: Callable[[str], AccessKey | None]) -> AccessKey | None:
        """The access key ``access_key_id`` (``load`` reads it from the database); None when there is none.

        Unknown ids are not remembered (a flood of made-up ids costs database reads, never memory);
        known ones live in a bounded LRU table like the other two.
        """
        table = self.cache._access_keys
        found = self._hit(table, access_key_id)
        if found is None:
            found = await self._load(table, access_key_id, lambda _store: load(access_key_id))
        return found

    async def confirm_current(self) -> None:
        """Before work a rerun could not repeat (reading a request's body): raise StaleSnapshot unless
        every lookup so far read the database or came from a cache that is still current (one read)."""
        if self.used_cache and (self.mixed or not await self.cache.is_current(self.version)):
            raise StaleSnapshot()

    def _hit(self, table: _Table[T], name: str) -> T | None:
        """``name`` from the cache (None: not there, or this snapshot reads fresh)."""
        if self.fresh:
            return None
        cached: tuple[T | None, int | None] = self.cache._cached(table, name)
        value, version = cached
        if value is not None:
            self.used_cache = True
            self._note(version)
        return value

    async def _load(self, table: _Table[T], name: str, load: Callable[[Store], T | None]) -> T | None:
        """``name`` read from the database (``load``), remembered when it exists."""
        store = self.cache._store
        loaded_version, loaded = await asyncio.to_thread(lambda: _load(store, load))
        self._note(loaded_version)
        if loaded is not None:  # nothing is remembered of what does not exist
            self.cache._remember(loaded_version, table, _names(name, loaded), loaded)
        return loaded

    def _note(self, version: int | None) -> None:
        if self.version is None:
            self.version = version
        elif version != self.version:
            self.mixed = True


def _load(store: Store, load: Callable[[Store], T | None]) -> tuple[int, T | None]:
    version = store.metadata_version()  # read first: the value loaded next is at least this new
    return version, load(store)


def _names(name: str, value: object) -> list[str]:
    if isinstance(value, Key):
        return list({name, value.id, value.name})
    return [name]


def _principal(
    store: Store, credential: Credential, client_tokens: Callable[[str], Principal | None] | None = None
) -> Principal | None:
    """The principal a bearer token (or a client token ``client_tokens`` knows) or certificate subject
    authenticates at the REST door (``admits``)."""
    found = None
    if credential.token_hash is not None:
        found = store.principal_by_token_hash(credential.token_hash)
        if found is None and client_tokens is not None:
            found = client_tokens(credential.token_hash)
    elif credential.subject is not None:
        found = store.principal_by_cert_subject(credential.subject)
    return found if found is not None and admits(Door.REST, found.role) else None


async def run_validated(
    cache: MetadataCache,
    audit: AuditLog,
    attempt: Callable[[Snapshot], Awaitable[T]],
    entry: Callable[[T], AuditEntry],
) -> T:
    """Run ``attempt`` on cached lookups and commit its audit ``entry``; again on fresh reads when
    the cache turned out stale. A refusal is raised at once unless it is one stale metadata could
    explain (:data:`STALE_EXPLAINABLE`), came from the cache, and the metadata version has moved
    on since; then the attempt runs again on fresh reads (as it does when it raised StaleSnapshot).
    Inputs are the caller's to check before: a bad ciphertext costs one attempt."""
    for number in range(ATTEMPTS):
        snapshot = cache.snapshot(fresh=number > 0)
        try:
            result = await attempt(snapshot)
        except StaleSnapshot:
            continue
        except KeyManagerError as exc:
            if snapshot.fresh or not snapshot.used_cache or not isinstance(exc, STALE_EXPLAINABLE):
                raise
            if not snapshot.mixed and await cache.is_current(snapshot.version):
                raise
            continue
        last = number == ATTEMPTS - 1
        if snapshot.mixed and not last:
            continue
        try:
            await audit.success(entry(result), None if last else snapshot.version)
        except StaleMetadata:
            cache.clear()
            continue
        return result
    raise AssertionError("unreachable: the last attempt commits unconditionally")
