"""Encrypt and Decrypt (and MAC, MACVerify) of the KMIP door, translated into the services' operations.

KMIP names the mode and the AAD, and gets the block cipher's output as it is: Encrypt and Decrypt
are the crypto service's raw modes (``services/raw_cipher.py``), which keep every rule — the key's
state and policy, one key one mode, the plaintext limit, the server's IV, decryption failures alike.
This module only translates: the payload's Cryptographic Parameters into a raw mode (Invalid Field
naming an AES mode not offered or a tag length outside 12 to 16), the data, IV, AAD and tag in, the
ciphertext, IV and tag out. An Encrypt that names an IV/Counter/Nonce, or asks for a non-random one,
is Invalid Field before any look-up (the IV is the server's: a caller's nonce on a GCM key turned
``encrypt`` into ``decrypt``, issue 41). Decryption takes the IV from the request, as KMIP defines.
MAC and MACVerify are the crypto service's unframed MAC of an HMAC key. Every use commits its
success record through ``run_validated``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from keymanager.domain.models import HMAC_KEY_BITS, Key
from keymanager.doors.kmip import spec
from keymanager.doors.kmip.calls import KmipCall
from keymanager.doors.kmip.keys import kmip_type
from keymanager.doors.kmip.refusals import NO_OBJECT, KmipRefusal, Reason, carried, invalid
from keymanager.doors.kmip.requests import (
    CipherRequest,
    DecryptResponse,
    EncryptResponse,
    MacResponse,
    MacVerified,
    Parameters,
    SignatureRequest,
)
from keymanager.errors import Forbidden, KeyNotFound
from keymanager.services import raw_cipher
from keymanager.services.audit_log import AuditLog
from keymanager.services.crypto import CryptoService
from keymanager.services.keys import visible
from keymanager.services.raw_cipher import RawCipher, RawMode, RawSealed, require_active
from keymanager.services.snapshot import MetadataCache, Snapshot, run_validated


class KmipCrypto:
    """The cryptographic operations of the KMIP door (see the module docstring)."""

    def __init__(self, raw: RawCipher, crypto: CryptoService, cache: MetadataCache, audit_log: AuditLog) -> None:
        self._raw = raw
        self._crypto = crypto
        self._cache = cache
        self._audit = audit_log

    async def encrypt(self, call: KmipCall, payload: CipherRequest) -> EncryptResponse:
        """The ciphertext, with the IV the server made and GCM's tag."""
        uid = call.uid(payload.unique_identifier)
        asked = _mode(payload.cryptographic_parameters)
        data = self._sized(payload.data)
        if payload.iv_counter_nonce is not None:
            raise invalid("IV/Counter/Nonce: the server makes the IV of every encryption; an Encrypt may not name one")
        if getattr(payload.cryptographic_parameters, "random_iv", None) is False:
            raise invalid("Random IV: the server makes a random IV for every encryption; it cannot be turned off")
        aad = bytes(payload.auth_additional_data or b"")

        async def attempt(snapshot: Snapshot) -> RawSealed:
            key = await visible_key(snapshot, call, uid)
            sealed = await self._raw.encrypt(key, call.principal, asked, data, aad)
            call.key_version = sealed.key_version
            return sealed

        done: RawSealed = await self._used(call, attempt)
        return EncryptResponse(uid, data=done.sealed, iv_counter_nonce=done.iv, auth_tag=done.tag)

    async def decrypt(self, call: KmipCall, payload: CipherRequest) -> DecryptResponse:
        """The plaintext; Cryptographic Failure for every failure of the ciphertext, IV, tag or AAD."""
        uid = call.uid(payload.unique_identifier)
        asked = _mode(payload.cryptographic_parameters)
        data = self._sized(payload.data)
        if payload.iv_counter_nonce is None:
            raise KmipRefusal(Reason.MISSING_DATA, "Decrypt needs the IV/Counter/Nonce the encryption used")
        iv = bytes(payload.iv_counter_nonce)
        aad = bytes(payload.auth_additional_data or b"")
        tag = bytes(payload.auth_tag or b"")

        async def attempt(snapshot: Snapshot) -> bytes:
            key = await visible_key(snapshot, call, uid)
            opened = await self._raw.decrypt(key, call.principal, asked, iv, data, aad, tag)
            call.key_version = opened.key_version
            return opened.plaintext

        plaintext = await self._used(call, attempt)
        return DecryptResponse(uid, data=plaintext)

    async def mac(self, call: KmipCall, payload: SignatureRequest) -> MacResponse:
        """The HMAC of the data, computed in the HSM with an HMAC key the caller's policy names for ``mac``."""
        uid = call.uid(payload.unique_identifier)
        data = self._sized(payload.data)
        asked = getattr(payload.cryptographic_parameters, "cryptographic_algorithm", None)

        async def attempt(snapshot: Snapshot) -> bytes:
            key = await visible_key(snapshot, call, uid)
            require_active(key)
            if asked is not None and key.algorithm in HMAC_KEY_BITS and asked != kmip_type(key)[0]:
                raise invalid(f"the key computes {kmip_type(key)[0].name}, not {asked.name}")
            computed = await self._crypto.mac(snapshot, call.principal, key.id, data, framed=False)
            call.key_version = computed.key_version
            return computed.mac

        mac = await self._used(call, attempt)
        return MacResponse(uid, mac_data=mac)

    async def mac_verify(self, call: KmipCall, payload: CipherRequest) -> MacVerified:
        """Whether the MAC is the data's under the HMAC key (computed in the HSM, compared in constant time)."""
        uid = call.uid(payload.unique_identifier)
        data = self._sized(payload.data)
        mac = payload.mac_data
        if mac is None:
            raise KmipRefusal(Reason.MISSING_DATA, "MACVerify needs the MAC")

        async def attempt(snapshot: Snapshot) -> bool:
            key = await visible_key(snapshot, call, uid)
            require_active(key)
            checked = await self._crypto.verify_mac(snapshot, call.principal, key.id, data, mac, framed=False)
            call.key_version = checked.key_version
            return checked.valid

        return MacVerified(uid, await self._used(call, attempt))

    async def _used(self, call: KmipCall, attempt: Callable[[Snapshot], Awaitable[Any]]) -> Any:
        """``attempt`` run on validated lookups, its success record committed before it answers."""
        return await run_validated(self._cache, self._audit, attempt, lambda _: call.success())

    def _sized(self, data: bytes | None) -> bytes:
        """The request's data, refused before any look-up when absent or over the plaintext limit."""
        found = carried(data)
        self._raw.sized(found)
        return found


async def visible_key(snapshot: Snapshot, call: KmipCall, uid: str) -> Key:
    """The key ``uid`` if the caller may see it; ItemNotFound alike for a key it may not see."""
    try:
        key = visible(await snapshot.key(uid), call.principal)
    except (KeyNotFound, Forbidden):  # alike; and errors a stale cache may explain
        raise KeyNotFound(NO_OBJECT) from None
    call.key_id = key.id
    return key


def _mode(parameters: Parameters | None) -> RawMode | None:
    """The mode the Cryptographic Parameters name (None: none named, the key's own); refused by name otherwise."""
    if parameters is None:
        return None
    algorithm = parameters.cryptographic_algorithm
    if algorithm is not None and algorithm != spec.CryptographicAlgorithm.AES:
        raise invalid(f"only AES is offered for Encrypt and Decrypt, not {algorithm.name}")
    block = parameters.block_cipher_mode
    if block is None:
        if parameters.padding_method not in (None, spec.PaddingMethod.PKCS5):
            raise invalid(f"AES-CBC is offered with PKCS5 padding only, not {parameters.padding_method.name}")
        return None if parameters.tag_length is None else raw_cipher.gcm(parameters.tag_length)
    if block == spec.BlockCipherMode.CBC:
        padding = parameters.padding_method
        if padding not in (None, spec.PaddingMethod.PKCS5):
            raise invalid(f"AES-CBC is offered with PKCS5 padding only, not {padding.name}")
        return raw_cipher.CBC_PAD
    if block == spec.BlockCipherMode.GCM:
        return raw_cipher.gcm(parameters.tag_length or 16)
    raise invalid(f"the block cipher mode {block.name} is not offered (CBC with PKCS5 padding and GCM are)")
