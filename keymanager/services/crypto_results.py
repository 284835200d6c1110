"""What the cryptographic operations of :class:`~keymanager.services.crypto.CryptoService` return:
each output beside the key and key version it used (ciphertexts, plaintexts, MACs, data keys, batches)."""

from __future__ import annotations

from dataclasses import dataclass

from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.errors import KeyManagerError


@dataclass(frozen=True)
class KeyUse:
    """The key and key version an operation used."""

    key_id: str
    key_version: int


@dataclass(frozen=True)
class Encrypted(KeyUse):
    ciphertext: str
    """``km:1:<key id>:<key version>:<base64 body>``."""


@dataclass(frozen=True)
class Decrypted(KeyUse):
    plaintext: bytes


@dataclass(frozen=True)
class Sealed(KeyUse):
    """AES-256-GCM output authenticating the caller's AAD alone
    (:meth:`~keymanager.services.crypto.CryptoService.seal_with_aad`)."""

    iv: bytes
    ciphertext: bytes
    tag: bytes
    objects: HsmObjects
    """The key version's HSM objects (for :meth:`~keymanager.services.crypto.CryptoService.confirm_sealed`)."""
    algorithm: Algorithm
    """The key's spec (the AES-GCM it was sealed with)."""


@dataclass(frozen=True)
class Mac(KeyUse):
    """An HMAC-SHA256 computed in the HSM (deterministic: a blind index)."""

    mac: bytes


@dataclass(frozen=True)
class DataKey:
    """A data key in plaintext (for the caller, once) beside its ciphertext under the named key."""

    plaintext: bytes
    encrypted: Encrypted


@dataclass(frozen=True)
class BatchResults:
    """One result or one error per item, in order; the key they used."""

    results: list[Encrypted | Decrypted | KeyManagerError]
    key_id: str

    @property
    def failed(self) -> int:
        return sum(isinstance(r, KeyManagerError) for r in self.results)


@dataclass(frozen=True)
class MacCheck(KeyUse):
    """Whether a MAC is the one the key version computes (compared in constant time)."""

    valid: bool
