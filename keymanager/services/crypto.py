"""Cryptographic use of keys: encryption, decryption, data keys, re-encryption, batches, MACs, streams.

One implementation per operation, awaited on the event loop: every operation finds its keys
through a :class:`~keymanager.services.snapshot.KeyLookup` (the request's snapshot: the cache,
or fresh database reads) and runs its HSM work on the HSM thread. What each returns is in
:mod:`keymanager.services.crypto_results`.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping, Sequence

from keymanager.domain import ciphertext as ct
from keymanager.domain.key_specs import SPECS, BlockMode, spec_of
from keymanager.domain.models import HsmObjects, Key, KeyVersion, Principal
from keymanager.domain.policy import Operation
from keymanager.domain.stream import StreamHeader
from keymanager.errors import (
    DecryptionFailed,
    InvalidRequest,
    KeyManagerError,
    KeyNotFound,
    PayloadTooLarge,
    UnknownKeyVersion,
    VersionBelowMinimum,
)
from keymanager.hsm import Hsm
from keymanager.services.crypto_results import (
    BatchResults,
    DataKey,
    Decrypted,
    Encrypted,
    KeyUse,
    Mac,
    MacCheck,
    Sealed,
)
from keymanager.services.key_use import usable
from keymanager.services.snapshot import KeyLookup
from keymanager.services.streams import StreamOpener, StreamSealer

Context = Mapping[str, str] | None

MAX_DATA_KEY_BYTES = 1024
"""The largest data key (AWS's ``NumberOfBytes`` bound); REST asks for 128 or 256 bits, the KMS API for
any number of bytes from 1 to this."""


class CryptoService:
    """Encrypts, decrypts and computes MACs with keys that never leave the HSM.

    Every cryptographic failure of a decryption (format, unknown key id, other key, bad tag,
    wrong context) raises the same DecryptionFailed. Refusals read from the public header
    alone have their own errors: Forbidden, KeyDisabled and other states, VersionBelowMinimum.
    Every method takes the request's ``snapshot``, where it finds the keys it names.
    """

    def __init__(self, hsm: Hsm, *, max_plaintext_bytes: int, max_batch_items: int = 1000) -> None:
        self._hsm = hsm
        self._max_plaintext = max_plaintext_bytes
        self._max_batch = max_batch_items

    # -- single fields ----------------------------------------------------------------
    async def encrypt(
        self, snapshot: KeyLookup, principal: Principal, ref: str, plaintext: bytes, context: Context = None
    ) -> Encrypted:
        """Encrypt ``plaintext`` under the primary version of key ``ref``."""
        self._check_size(plaintext)
        return await self._seal(usable(await snapshot.key(ref), principal, Operation.ENCRYPT), plaintext, context)

    async def decrypt(
        self, snapshot: KeyLookup, principal: Principal, text: str, context: Context = None, *, ref: str | None = None
    ) -> Decrypted:
        """Decrypt a ciphertext string, with key ``ref`` when given, else the key it names."""
        key, parsed = await _source(snapshot, principal, text, ref, Operation.DECRYPT)
        return await self._open(key, parsed, context)

    async def generate_data_key(
        self, snapshot: KeyLookup, principal: Principal, ref: str, bits: int = 256, context: Context = None
    ) -> DataKey:
        """A new random data key of ``bits`` (a multiple of 8, up to 8,192) from the HSM, with its
        ciphertext under key ``ref`` (one trip to the HSM); InvalidRequest for another size."""
        if bits % 8 or not 8 <= bits <= 8 * MAX_DATA_KEY_BYTES:
            raise InvalidRequest(f"a data key is 1 to {MAX_DATA_KEY_BYTES} bytes")
        key = usable(await snapshot.key(ref), principal, Operation.GENERATE_DATA_KEY)
        version = key.versions[key.primary_version]
        head = ct.header(key.id, version.version)
        plaintext, body = await self._hsm.adata_key(
            version.hsm, key.algorithm, head, bits // 8, ct.canonical_context(context)
        )
        return DataKey(plaintext=plaintext, encrypted=_encrypted(key, version, body))

    async def reencrypt(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        text: str,
        context: Context = None,
        *,
        ref: str | None = None,
        destination: str | None = None,
        destination_context: Context = None,
        operation: Operation = Operation.REENCRYPT,
    ) -> tuple[Encrypted, KeyUse]:
        """The ciphertext's plaintext under the primary version of ``destination`` (default: the source key).

        The source key is ``ref`` when given, else the key the ciphertext names; ``principal``
        needs ``operation`` on it (``reencrypt`` through REST, ``decrypt`` through the KMS API) and,
        for another destination key, ``encrypt`` on that one. ``destination_context`` defaults to
        ``context``. Returns the new ciphertext and the key version the old one was opened with.
        The plaintext never leaves the service.
        """
        key, parsed = await _source(snapshot, principal, text, ref, operation)
        target = key if destination is None else usable(await snapshot.key(destination), principal, Operation.ENCRYPT)
        opened = await self._open(key, parsed, context)
        encrypted = await self._seal(
            target, opened.plaintext, context if destination_context is None else destination_context
        )
        return encrypted, KeyUse(opened.key_id, opened.key_version)

    # -- AES-GCM with the caller's AAD (protocols that fix the AAD themselves: XKS, Vault Transit) -----
    async def seal_with_aad(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        plaintext: bytes,
        aad_of: Callable[[int], bytes],
        *,
        version: int | None = None,
        operation: Operation = Operation.ENCRYPT,
    ) -> Sealed:
        """AES-GCM of ``plaintext`` under version ``v`` of key ``ref`` (``version``, default the primary),
        authenticating ``aad_of(v)`` and nothing else (no ciphertext header); ``principal`` needs
        ``operation`` on the key (``reencrypt`` for a rewrap). InvalidRequest for a key of another mode or
        a version it does not have, VersionBelowMinimum below its minimum."""
        self._check_size(plaintext)
        key = _gcm(usable(await snapshot.key(ref), principal, operation))
        found = key.versions[key.primary_version] if version is None else _encryption_version(key, version)
        body = await self._hsm.aencrypt(found.hsm, key.algorithm, b"", plaintext, aad_of(found.version))
        iv, sealed = body[: ct.NONCE_BYTES], body[ct.NONCE_BYTES :]
        body, tag = sealed[: -ct.TAG_BYTES], sealed[-ct.TAG_BYTES :]
        return Sealed(key.id, found.version, iv, body, tag, objects=found.hsm, algorithm=key.algorithm)

    async def open_with_aad(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        version: int,
        body: bytes,
        aad: bytes,
        *,
        operation: Operation = Operation.DECRYPT,
    ) -> Decrypted:
        """The plaintext of IV ‖ ciphertext ‖ tag made by :meth:`seal_with_aad` with version ``version`` of
        key ``ref`` (``principal`` needs ``operation`` on it); DecryptionFailed for every failure of the
        ciphertext (VersionBelowMinimum below the key's minimum), InvalidRequest for a key of another mode."""
        key = _gcm(usable(await snapshot.key(ref), principal, operation))
        found = _decryption_version(key, version)
        plaintext = await self._hsm.adecrypt(found.hsm, key.algorithm, b"", body, aad)
        return Decrypted(key.id, found.version, plaintext)

    async def confirm_sealed(self, sealed: Sealed, aad: bytes) -> None:
        """Open what :meth:`seal_with_aad` just made (the same principal's own result: no policy check);
        DecryptionFailed if it does not open, so a corrupted ciphertext is never handed out."""
        body = sealed.iv + sealed.ciphertext + sealed.tag
        await self._hsm.adecrypt(sealed.objects, sealed.algorithm, b"", body, aad)

    # -- batches ----------------------------------------------------------------------
    async def encrypt_batch(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        items: Sequence[tuple[bytes | KeyManagerError, Context]],
    ) -> BatchResults:
        """Encrypt each ``(plaintext, context)``; an item that is already an error stays one."""
        self._check_batch(items)
        key = usable(await snapshot.key(ref), principal, Operation.ENCRYPT)
        version = key.versions[key.primary_version]
        prepared: list[tuple[bytes, bytes] | KeyManagerError] = []
        for plaintext, context in items:
            if not isinstance(plaintext, KeyManagerError) and len(plaintext) > self._max_plaintext:
                plaintext = PayloadTooLarge(f"plaintext is limited to {self._max_plaintext} bytes")
            prepared.append(plaintext if isinstance(plaintext, KeyManagerError) else _with_context(plaintext, context))
        todo = [item for item in prepared if not isinstance(item, KeyManagerError)]
        head = ct.header(key.id, version.version)
        bodies = iter(await self._hsm.aencrypt_many(version.hsm, key.algorithm, head, todo))
        results: list[Encrypted | Decrypted | KeyManagerError] = [
            item if isinstance(item, KeyManagerError) else _encrypted(key, version, next(bodies)) for item in prepared
        ]
        return BatchResults(results=results, key_id=key.id)

    async def decrypt_batch(
        self, snapshot: KeyLookup, principal: Principal, ref: str, items: Sequence[tuple[str, Context]]
    ) -> BatchResults:
        """Decrypt each ``(ciphertext, context)`` with key ``ref``; a bad item gets its own error."""
        self._check_batch(items)
        key = usable(await snapshot.key(ref), principal, Operation.DECRYPT)
        prepared: list[tuple[KeyVersion, tuple[HsmObjects, bytes, bytes, bytes]] | KeyManagerError] = []
        for text, context in items:
            try:
                parsed = _parsed_for(key, text)
                version = _decryption_version(key, parsed.key_version)
                encoded = ct.canonical_context(context)
            except KeyManagerError as exc:
                prepared.append(exc)
                continue
            prepared.append((version, (version.hsm, parsed.header, parsed.body, encoded)))
        todo = [item[1] for item in prepared if not isinstance(item, KeyManagerError)]
        opened = iter(await self._hsm.adecrypt_many(key.algorithm, todo))
        results: list[Encrypted | Decrypted | KeyManagerError] = []
        for item in prepared:
            if isinstance(item, KeyManagerError):
                results.append(item)
                continue
            plaintext = next(opened)
            results.append(Decrypted(key.id, item[0].version, plaintext) if isinstance(plaintext, bytes) else plaintext)
        return BatchResults(results=results, key_id=key.id)

    # -- MACs -------------------------------------------------------------------------
    async def mac(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        data: bytes,
        context: Context = None,
        *,
        framed: bool = True,
        version: int | None = None,
    ) -> Mac:
        """Deterministic HMAC of ``data`` (and the context) with version ``version`` (default: the primary)
        of HMAC key ``ref``, under the key's algorithm. ``framed=False``: of ``data`` alone, as AWS KMS's
        GenerateMac and Vault's hmac (no context)."""
        self._check_size(data)
        key = usable(await snapshot.key(ref), principal, Operation.MAC)
        used = key.versions[key.primary_version] if version is None else _encryption_version(key, version)
        digest = await self._hsm.amac(used.hsm, mac_message(data, context, framed=framed), key.algorithm)
        return Mac(key.id, used.version, digest)

    async def verify_mac(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        data: bytes,
        mac: bytes,
        context: Context = None,
        version: int | None = None,
        *,
        framed: bool = True,
    ) -> MacCheck:
        """Whether ``mac`` is the HMAC of ``data`` under version ``version`` (default: primary) of key ``ref``
        (``framed`` as for :meth:`mac`)."""
        self._check_size(data)
        key = usable(await snapshot.key(ref), principal, Operation.MAC)
        number = key.primary_version if version is None else version
        if key.version(number) is None:
            raise InvalidRequest("the key has no such version")
        if number < key.min_decryption_version:
            raise VersionBelowMinimum()
        message = mac_message(data, context, framed=framed)
        expected = await self._hsm.amac(key.versions[number].hsm, message, key.algorithm)
        return MacCheck(key.id, number, hmac.compare_digest(expected, mac))

    # -- streams ----------------------------------------------------------------------
    async def stream_sealer(
        self, snapshot: KeyLookup, principal: Principal, ref: str, segment_size: int, context: Context = None
    ) -> StreamSealer:
        """A sealer for an on-board encrypted stream under key ``ref`` (checks policy and state now)."""
        key = usable(await snapshot.key(ref), principal, Operation.ENCRYPT)
        return StreamSealer.for_key(self._hsm, key, segment_size, context)

    async def stream_key(self, snapshot: KeyLookup, principal: Principal, ref: str) -> Key:
        """Key ``ref`` if ``principal`` may decrypt with it now (policy and state; before any byte is read)."""
        return usable(await snapshot.key(ref), principal, Operation.DECRYPT)

    def stream_opener(self, key: Key, header: StreamHeader, context: Context = None) -> StreamOpener:
        """An opener of an on-board stream made with ``key`` (from :meth:`stream_key`); checks the header now."""
        return StreamOpener.for_key(self._hsm, key, header, context)

    async def seal(self, key: Key, plaintext: bytes, context: Context = None) -> Encrypted:
        """Encrypt ``plaintext`` under the primary version of ``key``, which the caller found usable for
        the operation it serves (a data key pair's private key: ``generate_data_key_pair``)."""
        self._check_size(plaintext)
        return await self._seal(key, plaintext, context)

    # -- steps ------------------------------------------------------------------------
    async def _seal(self, key: Key, plaintext: bytes, context: Context) -> Encrypted:
        version = key.versions[key.primary_version]
        head = ct.header(key.id, version.version)
        body = await self._hsm.aencrypt(version.hsm, key.algorithm, head, plaintext, ct.canonical_context(context))
        return _encrypted(key, version, body)

    async def _open(self, key: Key, parsed: ct.Ciphertext, context: Context) -> Decrypted:
        version = _decryption_version(key, parsed.key_version)
        plaintext = await self._hsm.adecrypt(
            version.hsm, key.algorithm, parsed.header, parsed.body, ct.canonical_context(context)
        )
        return Decrypted(key.id, version.version, plaintext)

    def _check_size(self, data: bytes) -> None:
        if len(data) > self._max_plaintext:
            raise PayloadTooLarge(f"plaintext is limited to {self._max_plaintext} bytes")

    def _check_batch(self, items: Sequence[object]) -> None:
        if len(items) > self._max_batch:
            raise PayloadTooLarge(f"a batch holds at most {self._max_batch} items")


def _with_context(plaintext: bytes, context: Context) -> tuple[bytes, bytes] | KeyManagerError:
    """A batch item's plaintext and canonical context, or the item's own error (a context out of bounds)."""
    try:
        return plaintext, ct.canonical_context(context)
    except KeyManagerError as exc:
        return exc


def mac_message(data: bytes, context: Context, *, framed: bool = True) -> bytes:
    """What the HMAC covers: ``uint64_be(len(context)) ‖ context ‖ data`` (context canonical);
    unframed (no context allowed), ``data`` alone."""
    if not framed:
        if context:
            raise InvalidRequest("an unframed MAC has no context")
        return data
    encoded = ct.canonical_context(context)
    return len(encoded).to_bytes(8, "big") + encoded + data


async def _source(
    snapshot: KeyLookup, principal: Principal, text: str, ref: str | None, operation: Operation
) -> tuple[Key, ct.Ciphertext]:
    """The key a ciphertext is to be opened with (``ref``, or the one it names) and the parsed ciphertext."""
    if ref is not None:
        key = usable(await snapshot.key(ref), principal, operation)
        return key, _parsed_for(key, text)
    parsed = ct.parse(text)
    try:
        found = await snapshot.key(parsed.key_id)
    except KeyNotFound:
        raise DecryptionFailed() from None
    return usable(found, principal, operation), parsed


def _parsed_for(key: Key, text: str) -> ct.Ciphertext:
    """``text`` parsed; DecryptionFailed unless it is a ciphertext of ``key``."""
    parsed = ct.parse(text)
    if parsed.key_id != key.id:
        raise DecryptionFailed()
    return parsed


def _gcm(key: Key) -> Key:
    if spec_of(key.algorithm).mode is not BlockMode.GCM:
        gcm = ", ".join(a for a, row in SPECS.items() if row.mode is BlockMode.GCM)
        raise InvalidRequest(f"this operation needs an AES-GCM key ({gcm})")
    return key


def _encryption_version(key: Key, number: int) -> KeyVersion:
    """Version ``number`` of ``key`` to encrypt with: InvalidRequest when the key has none, VersionBelowMinimum
    below its minimum (what it sealed could not be opened)."""
    version = key.version(number)
    if version is None:
        raise InvalidRequest("the key has no such version")
    if number < key.min_decryption_version:
        raise VersionBelowMinimum()
    return version


def _encrypted(key: Key, version: KeyVersion, body: bytes) -> Encrypted:
    return Encrypted(key.id, version.version, ct.encode(key.id, version.version, body))


def _decryption_version(key: Key, number: int) -> KeyVersion:
    version = key.version(number)
    if version is None:
        raise UnknownKeyVersion()
    if number < key.min_decryption_version:
        raise VersionBelowMinimum()
    return version
