"""Asymmetric keys: sign, verify, public keys, RSAES-OAEP, ECDH key agreement, data key pairs.

One implementation for every door (the native routes and the KMS door call these methods, as they
call :class:`~keymanager.services.crypto.CryptoService`). What a key allows comes from the table of
key types (:mod:`keymanager.domain.key_specs`): its usage, and the algorithms of its spec and usage.
Every private-key operation runs in the HSM (signing a digest computed here, OAEP decryption, ECDH
derivation); public-key operations (verification, OAEP encryption) run in ``cryptography`` with the
stored DER SubjectPublicKeyInfo.

Refusals are typed so each door can pick its protocol's error (``errors.py``): WrongKeyUsage (the
key's usage does not allow the operation), UnsupportedAlgorithm (an algorithm of another spec or
usage), WrongDigestLength, MessageTooLong, InvalidPeerKey, UnsupportedByHsm (the HSM lacks what
the algorithm needs); Forbidden and the key-state errors as for every key; DecryptionFailed, the
one answer for every bad OAEP ciphertext. A bad signature is a result (``valid`` False), not an error.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization

from keymanager.domain import public_keys
from keymanager.domain.key_specs import (
    DATA_KEY_PAIR_SPECS,
    MAX_RAW_MESSAGE_BYTES,
    SIGNING_HASHES,
    SIGNS_RAW_ONLY,
    VERIFIED_IN_HSM,
    Algorithm,
    EncryptionAlgorithm,
    KeyAgreementAlgorithm,
    KeySpec,
    KeyUsage,
    MessageType,
    SigningAlgorithm,
    digest_bytes,
    spec_of,
)
from keymanager.domain.models import Key, KeyVersion, Principal
from keymanager.domain.policy import Operation
from keymanager.errors import (
    DecryptionFailed,
    InvalidRequest,
    MessageTooLong,
    UnsupportedAlgorithm,
    WrongDigestLength,
)
from keymanager.hsm import Hsm
from keymanager.hsm.capabilities import feature
from keymanager.hsm.lane import SLOTS, Slots
from keymanager.services.crypto import CryptoService
from keymanager.services.crypto_results import Decrypted, Encrypted
from keymanager.services.key_use import usable
from keymanager.services.snapshot import KeyLookup

_DATA_KEY_PAIRS = Slots(SLOTS, "data key pair generation")
"""GenerateDataKeyPair's generations of this process at once (RSA-4096 takes OpenSSL a second)."""

Context = Mapping[str, str] | None


@dataclass(frozen=True)
class Signed:
    """A signature made in the HSM (ECDSA: DER; Ed25519: 64 raw bytes; RSA: the raw signature)."""

    key_id: str
    key_version: int
    algorithm: SigningAlgorithm
    signature: bytes


@dataclass(frozen=True)
class Verified:
    """Whether a signature is valid for the message under the key's public key."""

    key_id: str
    key_version: int
    algorithm: SigningAlgorithm
    valid: bool


@dataclass(frozen=True)
class PublicKeyInfo:
    """A key's public key (DER SubjectPublicKeyInfo) and what the key allows."""

    key: Key
    key_version: int
    spki_der: bytes
    usage: KeyUsage
    signing_algorithms: tuple[str, ...]
    encryption_algorithms: tuple[str, ...]
    key_agreement_algorithms: tuple[str, ...]

    @property
    def key_id(self) -> str:
        return self.key.id

    @property
    def pem(self) -> str:
        return public_keys.pem(self.spki_der)


@dataclass(frozen=True)
class PublicEncrypted:
    """A raw RSAES-OAEP ciphertext (as AWS returns it) under a key's public key."""

    key_id: str
    key_version: int
    algorithm: EncryptionAlgorithm
    ciphertext: bytes


@dataclass(frozen=True)
class SharedSecret:
    """An ECDH shared secret derived in the HSM (the raw x-coordinate, as AWS returns it)."""

    key_id: str
    key_version: int
    algorithm: KeyAgreementAlgorithm
    shared_secret: bytes


@dataclass(frozen=True)
class DataKeyPair:
    """A new key pair: its public key, its private key (PKCS#8 DER) encrypted under a symmetric key of
    ours (a ``km:1`` ciphertext), and the private key in plaintext when asked for."""

    key_id: str
    key_version: int
    key_pair_spec: Algorithm
    public_key: bytes
    private_key_ciphertext: Encrypted
    private_key_plaintext: bytes | None


class AsymmetricService:
    """Operations on asymmetric keys whose private halves never leave the HSM."""

    def __init__(self, hsm: Hsm, crypto: CryptoService) -> None:
        self._hsm = hsm
        self._crypto = crypto

    async def sign(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        message: bytes,
        message_type: MessageType,
        algorithm: SigningAlgorithm,
    ) -> Signed:
        """Sign ``message`` (RAW ≤ 4,096 bytes, or the DIGEST of one) with key ``ref``'s private key in
        the HSM; the refusals of the module docstring."""
        key, version, spec = await self._usable(snapshot, principal, ref, Operation.SIGN)
        _allowed(key, spec, KeyUsage.SIGN_VERIFY, algorithm)
        signed = _to_sign(algorithm, message, message_type)
        signature = await self._hsm.asign(version.hsm, key.algorithm, algorithm, signed)
        return Signed(key.id, version.version, algorithm, signature)

    async def verify(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        message: bytes,
        message_type: MessageType,
        signature: bytes,
        algorithm: SigningAlgorithm,
    ) -> Verified:
        """Whether ``signature`` is a valid ``algorithm`` signature of ``message`` under key ``ref``
        (checked with the stored public key; those of ``VERIFIED_IN_HSM`` in the HSM)."""
        key, version, spec = await self._usable(snapshot, principal, ref, Operation.VERIFY)
        _allowed(key, spec, KeyUsage.SIGN_VERIFY, algorithm)
        signed = _to_sign(algorithm, message, message_type)  # the same checks of the message as for signing
        if algorithm in VERIFIED_IN_HSM:
            valid = await self._hsm.averify(version.hsm, key.algorithm, algorithm, signed, signature)
        else:
            valid = public_keys.verify(_spki(version), algorithm, message, message_type, signature)
        return Verified(key.id, version.version, algorithm, valid)

    async def public_key(self, snapshot: KeyLookup, principal: Principal, ref: str) -> PublicKeyInfo:
        """Key ``ref``'s public key and the algorithms it allows (right ``get_public_key``); WrongKeyUsage
        for a symmetric key."""
        key = usable(await snapshot.key(ref), principal, Operation.GET_PUBLIC_KEY)
        version = key.versions[key.primary_version]
        return public_key_info(key, version)

    async def encrypt(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        plaintext: bytes,
        algorithm: EncryptionAlgorithm,
    ) -> PublicEncrypted:
        """RSAES-OAEP of ``plaintext`` under key ``ref``'s public key; MessageTooLong past what the key
        and hash take, UnsupportedByHsm when the HSM could not decrypt it (no ciphertext it cannot open)."""
        key, version, spec = await self._usable(snapshot, principal, ref, Operation.ENCRYPT)
        _allowed(key, spec, KeyUsage.ENCRYPT_DECRYPT, algorithm)
        await self._hsm.arequire(feature(key.algorithm, KeyUsage.ENCRYPT_DECRYPT, algorithm))
        limit = spec.rsa_oaep_max_plaintext(algorithm)
        if len(plaintext) > limit:
            raise MessageTooLong(f"{algorithm} under a {key.algorithm} key takes at most {limit} bytes of plaintext")
        ciphertext = public_keys.oaep_encrypt(_spki(version), algorithm, plaintext)
        return PublicEncrypted(key.id, version.version, algorithm, ciphertext)

    async def decrypt(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        ciphertext: bytes,
        algorithm: EncryptionAlgorithm,
    ) -> Decrypted:
        """The plaintext of a raw RSAES-OAEP ``ciphertext`` under key ``ref``, decrypted in the HSM;
        DecryptionFailed for every bad ciphertext (wrong length, tampered, another key's)."""
        key, version, spec = await self._usable(snapshot, principal, ref, Operation.DECRYPT)
        _allowed(key, spec, KeyUsage.ENCRYPT_DECRYPT, algorithm)
        assert spec.key_bits is not None
        if len(ciphertext) != spec.key_bits // 8:
            raise DecryptionFailed()
        plaintext = await self._hsm.adecrypt_oaep(version.hsm, key.algorithm, algorithm, ciphertext)
        return Decrypted(key.id, version.version, plaintext)

    async def derive_shared_secret(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        peer_spki_der: bytes,
        algorithm: KeyAgreementAlgorithm = KeyAgreementAlgorithm.ECDH,
    ) -> SharedSecret:
        """The ECDH shared secret of key ``ref``'s private key (in the HSM) and a peer's public key
        (DER SubjectPublicKeyInfo); InvalidPeerKey for a key that is malformed or on another curve."""
        key, version, spec = await self._usable(snapshot, principal, ref, Operation.DERIVE_SHARED_SECRET)
        _allowed(key, spec, KeyUsage.KEY_AGREEMENT, algorithm)
        point = public_keys.peer_point(spec, peer_spki_der)
        secret = await self._hsm.aderive(version.hsm, key.algorithm, point)
        return SharedSecret(key.id, version.version, algorithm, secret)

    async def generate_data_key_pair(
        self,
        snapshot: KeyLookup,
        principal: Principal,
        ref: str,
        pair_spec: Algorithm,
        context: Context = None,
        include_plaintext: bool = True,
    ) -> DataKeyPair:
        """A new key pair of ``pair_spec`` (made by ``cryptography``), its private key (PKCS#8 DER)
        encrypted under symmetric key ``ref`` (right ``generate_data_key_pair``) with ``context``;
        InvalidRequest for a spec that is not a data key pair spec."""
        if pair_spec not in DATA_KEY_PAIR_SPECS:
            raise InvalidRequest(f"key_pair_spec must be one of {', '.join(DATA_KEY_PAIR_SPECS)}")
        key = usable(await snapshot.key(ref), principal, Operation.GENERATE_DATA_KEY_PAIR)
        with _DATA_KEY_PAIRS.held():  # made in a thread (OpenSSL lets go of the GIL), not on the event loop
            private_der, public_der = await asyncio.to_thread(_new_pair, spec_of(pair_spec))
        encrypted = await self._crypto.seal(key, private_der, context)
        return DataKeyPair(
            key.id,
            encrypted.key_version,
            pair_spec,
            public_der,
            encrypted,
            private_der if include_plaintext else None,
        )

    async def _usable(
        self, snapshot: KeyLookup, principal: Principal, ref: str, operation: Operation
    ) -> tuple[Key, KeyVersion, KeySpec]:
        key = usable(await snapshot.key(ref), principal, operation, asymmetric=True)
        return key, key.versions[key.primary_version], spec_of(key.algorithm)


def public_key_info(key: Key, version: KeyVersion) -> PublicKeyInfo:
    """What :meth:`AsymmetricService.public_key` answers for ``key``'s ``version`` (also for DescribeKey)."""
    spec = spec_of(key.algorithm)
    usage = key.key_usage
    return PublicKeyInfo(
        key=key,
        key_version=version.version,
        spki_der=_spki(version),
        usage=usage,
        signing_algorithms=spec.algorithms(usage) if usage is KeyUsage.SIGN_VERIFY else (),
        encryption_algorithms=spec.algorithms(usage) if usage is KeyUsage.ENCRYPT_DECRYPT else (),
        key_agreement_algorithms=spec.algorithms(usage) if usage is KeyUsage.KEY_AGREEMENT else (),
    )


def _allowed(key: Key, spec: KeySpec, usage: KeyUsage, algorithm: str) -> None:
    """UnsupportedAlgorithm unless ``algorithm`` is one the key's spec allows for ``usage``."""
    allowed = spec.algorithms(usage)
    if algorithm not in allowed:
        raise UnsupportedAlgorithm(
            f"a {key.algorithm} {usage} key does not take {algorithm}: it takes {', '.join(allowed)}"
        )


def _to_sign(algorithm: SigningAlgorithm, message: bytes, message_type: MessageType) -> bytes:
    """What the HSM signs for ``message``: the message itself for pure Ed25519, else the digest
    (computed here for a RAW message); MessageTooLong, WrongDigestLength, UnsupportedAlgorithm."""
    if message_type is MessageType.RAW:
        if len(message) > MAX_RAW_MESSAGE_BYTES:
            raise MessageTooLong(f"a RAW message is at most {MAX_RAW_MESSAGE_BYTES} bytes: send its DIGEST")
        if algorithm in SIGNS_RAW_ONLY:
            return message
        return hashlib.new(SIGNING_HASHES[algorithm].value, message).digest()
    if algorithm in SIGNS_RAW_ONLY:
        raise UnsupportedAlgorithm(f"{algorithm} signs RAW messages only")
    expected = digest_bytes(algorithm)
    if len(message) != expected:
        raise WrongDigestLength(f"a DIGEST for {algorithm} is {expected} bytes, not {len(message)}")
    return message


def _spki(version: KeyVersion) -> bytes:
    if version.public_key is None:
        raise InvalidRequest("the key has no public key")
    return version.public_key


def _new_pair(spec: KeySpec) -> tuple[bytes, bytes]:
    """A new key pair of ``spec`` made by ``cryptography``: (PKCS#8 DER private key, DER SPKI)."""
    private = public_keys.new_private_key(spec)
    private_der = private.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_der, public_der
