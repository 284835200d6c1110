"""Cryptographic use of keys: encryption, decryption, data keys, re-encryption, batches, MACs."""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from keymanager.domain import ciphertext as ct
from keymanager.domain.models import HMAC_KEY_BITS, Algorithm, HsmObjects, Key, KeyVersion, Principal
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
from keymanager.services.keys import KeyService, require_enabled, require_use
from keymanager.services.snapshot import Snapshot
from keymanager.services.streams import StreamOpener, StreamSealer

Context = Mapping[str, str] | None

DATA_KEY_BITS = (128, 192, 256)
"""Data key sizes (192 only through the KMS API's ``NumberOfBytes`` 24: the Encryption SDK's AES-192 suites)."""
_PENDING = DecryptionFailed()
"""Placeholder of a batch item still in the HSM (every one is replaced before results leave)."""


@dataclass(frozen=True)
class Encrypted:
    ciphertext: str
    key_id: str
    key_version: int


@dataclass(frozen=True)
class Decrypted:
    plaintext: bytes
    key_id: str
    key_version: int


@dataclass(frozen=True)
class DataKey:
    plaintext: bytes
    encrypted: Encrypted


@dataclass(frozen=True)
class Mac:
    mac: bytes
    key_id: str
    key_version: int


@dataclass(frozen=True)
class MacCheck:
    valid: bool
    key_id: str
    key_version: int


@dataclass(frozen=True)
class BatchResults:
    """One result or one error per item, in order; the key they used."""

    results: list[Encrypted | Decrypted | KeyManagerError]
    key_id: str

    @property
    def failed(self) -> int:
        return sum(isinstance(r, KeyManagerError) for r in self.results)


class CryptoService:
    """Encrypts, decrypts and computes MACs with keys that never leave the HSM.

    Every cryptographic failure of a decryption (format, unknown key id, other key, bad tag,
    wrong context) raises the same DecryptionFailed. Refusals read from the public header
    alone have their own errors: Forbidden, KeyDisabled and other states, VersionBelowMinimum.
    """

    def __init__(self, keys: KeyService, hsm: Hsm, *, max_plaintext_bytes: int, max_batch_items: int = 1000) -> None:
        self._keys = keys
        self._hsm = hsm
        self._max_plaintext = max_plaintext_bytes
        self._max_batch = max_batch_items

    # -- single fields (hot path: keys from a snapshot, HSM awaited) ----------------------
    async def encrypt(
        self, keys: Snapshot, principal: Principal, ref: str, plaintext: bytes, context: Context = None
    ) -> Encrypted:
        """Encrypt ``plaintext`` under the primary version of key ``ref``."""
        self._check_size(plaintext)
        key = _usable(await keys.key(ref), principal, Operation.ENCRYPT)
        version = key.versions[key.primary_version]
        head = ct.header(key.id, version.version)
        body = await self._hsm.aencrypt(version.hsm, key.algorithm, head, plaintext, ct.canonical_context(context))
        return Encrypted(ct.Ciphertext(key.id, version.version, body).encode(), key.id, version.version)

    async def decrypt(
        self, keys: Snapshot, principal: Principal, text: str, context: Context = None, *, ref: str | None = None
    ) -> Decrypted:
        """Decrypt a ciphertext string, with key ``ref`` when given, else the key it names."""
        if ref is not None:
            key = _usable(await keys.key(ref), principal, Operation.DECRYPT)
            parsed = ct.parse(text)
            if parsed.key_id != key.id:
                raise DecryptionFailed()
        else:
            parsed = ct.parse(text)
            try:
                found = await keys.key(parsed.key_id)
            except KeyNotFound:
                raise DecryptionFailed() from None
            key = _usable(found, principal, Operation.DECRYPT)
        version = _decryption_version(key, parsed.key_version)
        plaintext = await self._hsm.adecrypt(
            version.hsm, key.algorithm, parsed.header, parsed.body, ct.canonical_context(context)
        )
        return Decrypted(plaintext=plaintext, key_id=key.id, key_version=version.version)

    async def generate_data_key(
        self, keys: Snapshot, principal: Principal, ref: str, bits: int = 256, context: Context = None
    ) -> DataKey:
        """A new random data key from the HSM, with its ciphertext under key ``ref`` (one trip to the HSM)."""
        if bits not in DATA_KEY_BITS:
            raise InvalidRequest("bits must be 128, 192 or 256")
        key = _usable(await keys.key(ref), principal, Operation.GENERATE_DATA_KEY)
        version = key.versions[key.primary_version]
        head = ct.header(key.id, version.version)
        plaintext, body = await self._hsm.adata_key(
            version.hsm, key.algorithm, head, bits // 8, ct.canonical_context(context)
        )
        encrypted = Encrypted(ct.Ciphertext(key.id, version.version, body).encode(), key.id, version.version)
        return DataKey(plaintext=plaintext, encrypted=encrypted)

    def reencrypt(
        self,
        principal: Principal,
        ref: str,
        text: str,
        context: Context = None,
        *,
        destination: str | None = None,
        destination_context: Context = None,
    ) -> Encrypted:
        """The ciphertext's plaintext under the primary version of ``destination`` (default: key ``ref``).

        Needs ``reencrypt`` on key ``ref`` and, for another destination key, ``encrypt`` on it.
        The plaintext never leaves the service.
        """
        key, parsed = self._source(principal, text, ref, Operation.REENCRYPT)
        target = key if destination is None else self._usable(destination, principal, Operation.ENCRYPT)
        plaintext = self._open(key, parsed, context).plaintext
        return self._seal(target, plaintext, context if destination_context is None else destination_context)

    # -- batches ----------------------------------------------------------------------
    async def encrypt_batch(
        self, keys: Snapshot, principal: Principal, ref: str, items: Sequence[tuple[bytes | KeyManagerError, Context]]
    ) -> BatchResults:
        """Encrypt each ``(plaintext, context)``; an item that is already an error stays one."""
        self._check_batch(items)
        key = _usable(await keys.key(ref), principal, Operation.ENCRYPT)
        version = key.versions[key.primary_version]
        head = ct.header(key.id, version.version)
        results: list[Encrypted | Decrypted | KeyManagerError] = []
        todo: list[tuple[int, bytes, bytes]] = []
        for index, (plaintext, context) in enumerate(items):
            if not isinstance(plaintext, KeyManagerError) and len(plaintext) > self._max_plaintext:
                plaintext = PayloadTooLarge(f"plaintext is limited to {self._max_plaintext} bytes")
            if isinstance(plaintext, KeyManagerError):
                results.append(plaintext)
            else:
                results.append(_PENDING)
                todo.append((index, plaintext, ct.canonical_context(context)))
        bodies = await self._hsm.aencrypt_many(version.hsm, key.algorithm, head, [(p, c) for _, p, c in todo])
        for (index, _, _), body in zip(todo, bodies, strict=True):
            text = ct.Ciphertext(key.id, version.version, body).encode()
            results[index] = Encrypted(ciphertext=text, key_id=key.id, key_version=version.version)
        return BatchResults(results=results, key_id=key.id)

    async def decrypt_batch(
        self, keys: Snapshot, principal: Principal, ref: str, items: Sequence[tuple[str, Context]]
    ) -> BatchResults:
        """Decrypt each ``(ciphertext, context)`` with key ``ref``; a bad item gets its own error."""
        self._check_batch(items)
        key = _usable(await keys.key(ref), principal, Operation.DECRYPT)
        results: list[Encrypted | Decrypted | KeyManagerError] = []
        todo: list[tuple[int, int, tuple[HsmObjects, bytes, bytes, bytes]]] = []
        for index, (text, context) in enumerate(items):
            try:
                parsed = ct.parse(text)
                if parsed.key_id != key.id:
                    raise DecryptionFailed()
                version = _decryption_version(key, parsed.key_version)
            except KeyManagerError as exc:
                results.append(exc)
                continue
            results.append(_PENDING)
            todo.append(
                (index, version.version, (version.hsm, parsed.header, parsed.body, ct.canonical_context(context)))
            )
        opened = await self._hsm.adecrypt_many(key.algorithm, [args for _, _, args in todo])
        for (index, number, _), plaintext in zip(todo, opened, strict=True):
            results[index] = (
                Decrypted(plaintext=plaintext, key_id=key.id, key_version=number)
                if isinstance(plaintext, bytes)
                else plaintext
            )
        return BatchResults(results=results, key_id=key.id)

    # -- MACs -------------------------------------------------------------------------
    async def mac(
        self,
        keys: Snapshot,
        principal: Principal,
        ref: str,
        data: bytes,
        context: Context = None,
        *,
        framed: bool = True,
    ) -> Mac:
        """Deterministic HMAC of ``data`` (and the context) with the primary version of HMAC key ``ref``,
        under the key's algorithm. ``framed=False``: of ``data`` alone, as AWS KMS's GenerateMac (no context)."""
        self._check_size(data)
        key = _usable_for_mac(await keys.key(ref), principal)
        version = key.versions[key.primary_version]
        digest = await self._hsm.amac(version.hsm, mac_message(data, context, framed=framed), key.algorithm)
        return Mac(mac=digest, key_id=key.id, key_version=version.version)

    async def verify_mac(
        self,
        keys: Snapshot,
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
        key = _usable_for_mac(await keys.key(ref), principal)
        number = key.primary_version if version is None else version
        if key.version(number) is None:
            raise InvalidRequest("the key has no such version")
        if number < key.min_decryption_version:
            raise VersionBelowMinimum()
        message = mac_message(data, context, framed=framed)
        expected = await self._hsm.amac(key.versions[number].hsm, message, key.algorithm)
        return MacCheck(valid=hmac.compare_digest(expected, mac), key_id=key.id, key_version=number)

    # -- streams ----------------------------------------------------------------------
    def stream_sealer(self, principal: Principal, ref: str, segment_size: int, context: Context = None) -> StreamSealer:
        """A sealer for an on-board encrypted stream under key ``ref`` (checks policy and state now)."""
        key = self._usable(ref, principal, Operation.ENCRYPT)
        return StreamSealer.for_key(self._hsm, key, segment_size, context)

    def stream_key(self, principal: Principal, ref: str) -> Key:
        """Key ``ref`` if ``principal`` may decrypt with it now (policy and state; before any byte is read)."""
        return self._usable(ref, principal, Operation.DECRYPT)

    def stream_opener(
        self, principal: Principal, ref: str, header: StreamHeader, context: Context = None
    ) -> StreamOpener:
        """An opener of an on-board stream made with key ``ref`` (checks policy, state and the header now)."""
        return StreamOpener.for_key(self._hsm, self.stream_key(principal, ref), header, context)

    # -- steps ------------------------------------------------------------------------
    def _seal(self, key: Key, plaintext: bytes, context: Context) -> Encrypted:
        version = key.versions[key.primary_version]
        head = ct.header(key.id, version.version)
        body = self._hsm.encrypt(version.hsm, key.algorithm, head, plaintext, ct.canonical_context(context))
        return Encrypted(ct.Ciphertext(key.id, version.version, body).encode(), key.id, version.version)

    def _open(self, key: Key, parsed: ct.Ciphertext, context: Context) -> Decrypted:
        version = _decryption_version(key, parsed.key_version)
        plaintext = self._hsm.decrypt(
            version.hsm, key.algorithm, parsed.header, parsed.body, ct.canonical_context(context)
        )
        return Decrypted(plaintext=plaintext, key_id=key.id, key_version=version.version)

    def _source(
        self, principal: Principal, text: str, ref: str | None, operation: Operation
    ) -> tuple[Key, ct.Ciphertext]:
        """The key a ciphertext is to be opened with (``ref``, or the one it names) and the parsed ciphertext."""
        if ref is not None:
            key = self._usable(ref, principal, operation)
            parsed = ct.parse(text)
            if parsed.key_id != key.id:
                raise DecryptionFailed()
            return key, parsed
        parsed = ct.parse(text)
        try:
            return self._usable(parsed.key_id, principal, operation), parsed
        except KeyNotFound:
            raise DecryptionFailed() from None

    def _usable(self, ref: str, principal: Principal, operation: Operation) -> Key:
        return _usable(self._keys.find(ref), principal, operation)

    def _check_size(self, data: bytes) -> None:
        if len(data) > self._max_plaintext:
            raise PayloadTooLarge(f"plaintext is limited to {self._max_plaintext} bytes")

    def _check_batch(self, items: Sequence[object]) -> None:
        if len(items) > self._max_batch:
            raise PayloadTooLarge(f"a batch holds at most {self._max_batch} items")


def mac_message(data: bytes, context: Context, *, framed: bool = True) -> bytes:
    """What the HMAC covers: ``uint64_be(len(context)) ‖ context ‖ data`` (context canonical);
    unframed (no context allowed), ``data`` alone."""
    if not framed:
        if context:
            raise InvalidRequest("an unframed MAC has no context")
        return data
    encoded = ct.canonical_context(context)
    return len(encoded).to_bytes(8, "big") + encoded + data


def _usable(key: Key, principal: Principal, operation: Operation) -> Key:
    """``key`` if ``principal`` may use it for ``operation`` now and it encrypts; else the refusal."""
    require_use(key, principal, operation)
    require_enabled(key)
    if key.algorithm in HMAC_KEY_BITS:
        raise InvalidRequest(f"an {key.algorithm} key only computes MACs")
    if key.algorithm is Algorithm.FF1_AES_256:
        raise InvalidRequest("an FF1_AES_256 key only makes tokens")
    return key


def _usable_for_mac(key: Key, principal: Principal) -> Key:
    """``key`` if ``principal`` may compute MACs with it now and it is an HMAC key; else the refusal."""
    require_use(key, principal, Operation.MAC)
    require_enabled(key)
    if key.algorithm not in HMAC_KEY_BITS:
        raise InvalidRequest(f"MACs need a key of an HMAC algorithm ({', '.join(HMAC_KEY_BITS)})")
    return key


def _decryption_version(key: Key, number: int) -> KeyVersion:
    version = key.version(number)
    if version is None:
        raise UnknownKeyVersion()
    if number < key.min_decryption_version:
        raise VersionBelowMinimum()
    return version
