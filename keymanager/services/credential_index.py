"""Which presented credentials exist, answered without a lookup per credential: what lets the
failed-authentication throttle (``services/throttle.py``) limit strangers only.

An address that failed too often is refused before its credentials are looked up, so a flood of
guessed tokens costs no database reads. A good client behind the same address (a balancer, a NAT)
must still be served, with a credential made a second ago or long ago, on a worker that never saw
it. :class:`CredentialIndex` answers "is this a stored credential?" for such requests from a
per-process set of digests of every stored credential's name — bearer token hashes, client
certificate subjects, access key ids — rebuilt whenever the metadata version moved.

A name the index holds is vouched for at once (the ordinary authentication that follows decides:
a credential deleted since the index was built costs one lookup, then fails as any other). What a
stranger can cost through it: a name the index does not hold waits for one *refresh*,
one single-row read of the metadata version (a full reload only when the version moved, which
strangers cannot cause); refreshes run one at a time per process, and every request waiting
shares the next one, so a flood of guessed credentials costs at most one read in flight per
worker and no memory. A refresh begins after the request arrived, so a credential committed
before the request was sent is always seen.

The index is bounded (``KM_CREDENTIAL_INDEX_MAX`` of each kind); when the store holds more, the
credentials beyond the bound are not vouched for (a throttled address is then refused for them as
for strangers) and the first such load logs a warning. A digest is 64 bits of BLAKE2b: what a
collision could buy is one ordinary lookup of a credential, never an authentication.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from keymanager.db.credentials import CredentialReader, StoredCredentials
from keymanager.domain.credential_kinds import BEARER_TOKEN, CERTIFICATE_SUBJECT, SIGV4_ACCESS_KEY

log = logging.getLogger(__name__)

TOKEN = str(BEARER_TOKEN.index_prefix)
SUBJECT = str(CERTIFICATE_SUBJECT.index_prefix)
ACCESS_KEY = str(SIGV4_ACCESS_KEY.index_prefix)
"""Prefixes of the names, each its kind's (``domain/credential_kinds.py``): ``t:<token hash>`` and
``s:<subject>`` (as ``Credential.cache_name``), ``a:<access key id>``; AppRole secret ids' hashes
and client tokens' are among the tokens (``APPROLE.index_prefix``)."""


def _digest(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")


class _Names:
    """The digests of the credentials stored under one metadata version."""

    def __init__(self, stored: StoredCredentials) -> None:
        self.version = stored.version
        self.complete = stored.complete
        self.digests = frozenset(
            [_digest(TOKEN + n) for n in stored.token_hashes]
            + [_digest(SUBJECT + n) for n in stored.cert_subjects]
            + [_digest(ACCESS_KEY + n) for n in stored.access_key_ids]
        )


class CredentialIndex:
    """Digests of every stored credential's name in this process (see the module docstring); used
    from the event loop only."""

    def __init__(self, reader: CredentialReader, *, limit: int) -> None:
        self._reader = reader
        self.limit = limit
        self._names: _Names | None = None
        self._lock: asyncio.Lock | None = None
        self._started = 0
        self._finished = 0
        self.refreshes = 0
        """Refreshes run since the process started (each one version read, maybe a reload)."""

    def __len__(self) -> int:
        return 0 if self._names is None else len(self._names.digests)

    async def holds(self, name: str) -> bool:
        """Whether ``name`` (``t:<token hash>``, ``s:<subject>``, ``a:<access key id>``) is a stored
        credential's, as of a metadata version read after this call began; ``DatabaseUnavailable``."""
        digest = _digest(name)
        if self._names is not None and digest in self._names.digests:
            return True
        await self._refresh()
        return self._names is not None and digest in self._names.digests

    async def _refresh(self) -> None:
        """Return once a refresh that began after this call has finished (running it, or another's)."""
        asked = self._started
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._finished > asked:  # one began after we asked, and is done
                return
            self._started += 1
            number = self._started
            try:
                self._names = await asyncio.to_thread(self._current, self._names)
                self.refreshes += 1
            finally:
                self._finished = number

    def _current(self, names: _Names | None) -> _Names:
        if names is not None and self._reader.version() == names.version:
            return names
        loaded = _Names(self._reader.credentials(self.limit))
        if not loaded.complete and (names is None or names.complete):
            log.warning(
                "more than %d credentials of a kind are stored: the throttle's index holds %d of each "
                "(KM_CREDENTIAL_INDEX_MAX); the others are throttled as strangers' from a throttled address",
                self.limit,
                self.limit,
            )
        return loaded
