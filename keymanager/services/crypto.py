"""Cryptographic use of keys: encrypt and decrypt small fields on the HSM."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from keymanager.domain import ciphertext as ct
from keymanager.domain.models import Algorithm, Key, KeyState, KeyVersion, Principal
from keymanager.domain.policy import Operation
from keymanager.errors import (
    DecryptionFailed,
    InvalidRequest,
    KeyDestroyed,
    KeyDisabled,
    KeyNotFound,
    KeyPendingDeletion,
    PayloadTooLarge,
    VersionBelowMinimum,
)
from keymanager.hsm import Hsm
from keymanager.services.keys import KeyService, require_use

_STATE_ERRORS = {
    KeyState.DISABLED: KeyDisabled,
    KeyState.PENDING_DELETION: KeyPendingDeletion,
    KeyState.DESTROYED: KeyDestroyed,
}


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


class CryptoService:
    """Encrypts and decrypts with keys that never leave the HSM."""

    def __init__(self, keys: KeyService, hsm: Hsm, *, max_plaintext_bytes: int) -> None:
        self._keys = keys
        self._hsm = hsm
        self._max_plaintext = max_plaintext_bytes

    def encrypt(
        self, principal: Principal, ref: str, plaintext: bytes, context: Mapping[str, str] | None = None
    ) -> Encrypted:
        """Encrypt ``plaintext`` under the primary version of key ``ref``.

        Raises KeyNotFound, Forbidden, KeyDisabled (and other state errors), InvalidRequest for
        an HMAC key, PayloadTooLarge over the plaintext limit, HsmUnavailable.
        """
        if len(plaintext) > self._max_plaintext:
            raise PayloadTooLarge(f"plaintext is limited to {self._max_plaintext} bytes")
        key = self._usable(ref, principal, Operation.ENCRYPT)
        version = key.versions[key.primary_version]
        head = ct.header(key.id, version.version)
        body = self._hsm.encrypt(version.hsm, key.algorithm, head, plaintext, ct.canonical_context(context))
        text = ct.Ciphertext(key.id, version.version, body).encode()
        return Encrypted(ciphertext=text, key_id=key.id, key_version=version.version)

    def decrypt(
        self,
        principal: Principal,
        text: str,
        context: Mapping[str, str] | None = None,
        *,
        ref: str | None = None,
    ) -> Decrypted:
        """Decrypt a ciphertext string, with key ``ref`` when given, else the key it names.

        Every cryptographic failure (format, unknown key id, other key, bad tag, wrong
        context) raises the same DecryptionFailed. Refusals read from the public header
        alone have their own errors: Forbidden, KeyDisabled, VersionBelowMinimum.
        """
        if ref is not None:
            key = self._usable(ref, principal, Operation.DECRYPT)
            parsed = ct.parse(text)
            if parsed.key_id != key.id:
                raise DecryptionFailed()
        else:
            parsed = ct.parse(text)
            try:
                key = self._usable(parsed.key_id, principal, Operation.DECRYPT)
            except KeyNotFound:
                raise DecryptionFailed() from None
        version = self._decryption_version(key, parsed.key_version)
        plaintext = self._hsm.decrypt(
            version.hsm, key.algorithm, parsed.header, parsed.body, ct.canonical_context(context)
        )
        return Decrypted(plaintext=plaintext, key_id=key.id, key_version=version.version)

    def _usable(self, ref: str, principal: Principal, operation: Operation) -> Key:
        key = self._keys.find(ref)
        require_use(key, principal, operation)
        if key.state is not KeyState.ENABLED:
            raise _STATE_ERRORS[key.state]()
        if key.algorithm is Algorithm.HMAC_SHA256:
            raise InvalidRequest("an HMAC_SHA256 key only computes MACs")
        return key

    @staticmethod
    def _decryption_version(key: Key, number: int) -> KeyVersion:
        version = key.version(number)
        if version is None:
            raise DecryptionFailed()
        if number < key.min_decryption_version:
            raise VersionBelowMinimum()
        return version
