"""Encrypt and Decrypt (and MAC, MACVerify) of the KMIP door, with the keys of the services.

KMIP names the mode, the IV and the AAD, and gets the block cipher's output as it is, so these run
the HSM's AES in that mode on the key's AES object (``hsm/block_cipher.py``), not our ciphertext
format. Modes: AES-CBC with PKCS5 padding (an IV of 16 bytes; none given: the server makes one
and answers it, as libmongocrypt's delegated mode expects) and AES-GCM (an IV of 12 bytes, made
when none is given; the AAD; a tag of 12 to 16 bytes, as long on decryption as its Tag Length says,
16 when it says none). The key must be Active, of an AES-GCM type
of the table (``AES_128_GCM``, ``AES_192_GCM``, ``AES_256_GCM``: what KMIP's Create makes), its
policy naming the caller for ``encrypt`` or ``decrypt`` (``services/key_use.py`` ``usable``), and
its Cryptographic Usage Mask, when a client
set one, must hold the operation's bit. Every use commits its success record through
``run_validated``. Every failure of a decryption answers the same Cryptographic Failure.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kmip.core import attributes as kmip_attributes
from kmip.core import enums
from kmip.core import objects as kmip_objects
from kmip.core.messages import payloads

from keymanager.domain.models import HMAC_KEY_BITS, Key, KmipState
from keymanager.domain.policy import Operation
from keymanager.errors import DecryptionFailed, Forbidden, KeyDisabled, KeyNotFound
from keymanager.hsm import Hsm, block_cipher
from keymanager.hsm.token import Token
from keymanager.services.audit_log import AuditLog
from keymanager.services.crypto import CryptoService
from keymanager.services.key_use import usable
from keymanager.services.keys import visible
from keymanager.services.kmip.calls import KmipCall
from keymanager.services.kmip.fast import MacVerified
from keymanager.services.kmip.keys import KMIP_AES, kmip_type
from keymanager.services.kmip.messages import NO_OBJECT, KmipRefusal, Reason, denied, invalid
from keymanager.services.snapshot import MetadataCache, Snapshot, run_validated

CBC_IV_BYTES = 16
GCM_IV_BYTES = 12
GCM_TAG_BYTES = (12, 13, 14, 15, 16)
_MASK_BITS = {
    Operation.ENCRYPT: enums.CryptographicUsageMask.ENCRYPT.value,
    Operation.DECRYPT: enums.CryptographicUsageMask.DECRYPT.value,
}


@dataclass(frozen=True)
class Mode:
    """The block cipher mode of one Encrypt or Decrypt: CBC with PKCS5 padding, or GCM."""

    gcm: bool
    tag_bytes: int = 16


class KmipCrypto:
    """The cryptographic operations of the KMIP door (see the module docstring)."""

    def __init__(
        self, hsm: Hsm, crypto: CryptoService, cache: MetadataCache, audit_log: AuditLog, *, max_plaintext_bytes: int
    ) -> None:
        self._hsm = hsm
        self._crypto = crypto
        self._cache = cache
        self._audit = audit_log
        self._max = max_plaintext_bytes

    async def encrypt(self, call: KmipCall, payload: payloads.EncryptRequestPayload) -> payloads.EncryptResponsePayload:
        """The ciphertext, with the IV it used (when the server made it) and GCM's tag."""
        uid = call.uid(payload.unique_identifier)
        mode = _mode(payload.cryptographic_parameters)
        data = self._sized(payload.data)
        given = payload.iv_counter_nonce
        iv = _iv(given, mode) if given is not None else None
        aad = bytes(payload.auth_additional_data or b"")

        async def attempt(snapshot: Snapshot) -> tuple[bytes, bytes, bytes | None]:
            label = await self._label(snapshot, call, uid, Operation.ENCRYPT)
            return await self._hsm.acall(_kmip_encrypt, mode, label, iv, data, aad)

        used_iv, sealed, tag = await self._used(call, attempt)
        return payloads.EncryptResponsePayload(
            unique_identifier=uid, data=sealed, iv_counter_nonce=None if given is not None else used_iv, auth_tag=tag
        )

    async def decrypt(self, call: KmipCall, payload: payloads.DecryptRequestPayload) -> payloads.DecryptResponsePayload:
        """The plaintext; Cryptographic Failure for every failure of the ciphertext, IV, tag or AAD."""
        uid = call.uid(payload.unique_identifier)
        mode = _mode(payload.cryptographic_parameters)
        data = self._sized(payload.data)
        if payload.iv_counter_nonce is None:
            raise KmipRefusal(Reason.MISSING_DATA, "Decrypt needs the IV/Counter/Nonce the encryption used")
        iv = _iv(payload.iv_counter_nonce, mode)
        aad = bytes(payload.auth_additional_data or b"")
        tag = bytes(payload.auth_tag or b"")
        if mode.gcm and len(tag) not in GCM_TAG_BYTES:
            raise KmipRefusal(Reason.MISSING_DATA, "an AES-GCM decryption needs the authenticated encryption tag")

        async def attempt(snapshot: Snapshot) -> bytes:
            label = await self._label(snapshot, call, uid, Operation.DECRYPT)
            if mode.gcm and len(tag) != mode.tag_bytes:  # a tag cut short is a forgery's shortcut: as a bad tag
                raise DecryptionFailed()
            if mode.gcm:
                opened: bytes = await self._hsm.acall(block_cipher.gcm_decrypt, label, iv, data, aad, tag)
                return opened
            return await self._hsm.acall(block_cipher.cbc_pad_decrypt, label, iv, data)

        plaintext = await self._used(call, attempt)
        return payloads.DecryptResponsePayload(unique_identifier=uid, data=plaintext)

    async def mac(self, call: KmipCall, payload: payloads.MACRequestPayload) -> payloads.MACResponsePayload:
        """The HMAC of the data, computed in the HSM with an HMAC key the caller's policy names for ``mac``."""
        uid = call.uid(payload.unique_identifier)
        data = self._sized(getattr(payload.data, "value", None))  # PyKMIP's MAC payload holds primitives
        asked = getattr(payload.cryptographic_parameters, "cryptographic_algorithm", None)

        async def attempt(snapshot: Snapshot) -> bytes:
            key = await visible_key(snapshot, call, uid)
            if key.kmip_state is not KmipState.ACTIVE:
                raise KeyDisabled(f"the key is {key.kmip_state.value.replace('_', '-')}: only an active key is used")
            if asked is not None and key.algorithm in HMAC_KEY_BITS and asked != kmip_type(key)[0]:
                raise invalid(f"the key computes {kmip_type(key)[0].name}, not {asked.name}")
            computed = await self._crypto.mac(snapshot, call.principal, key.id, data, framed=False)
            call.key_version = computed.key_version
            return computed.mac

        mac = await self._used(call, attempt)
        return payloads.MACResponsePayload(
            unique_identifier=kmip_attributes.UniqueIdentifier(uid), mac_data=kmip_objects.MACData(mac)
        )

    async def mac_verify(self, call: KmipCall, payload: Any) -> MacVerified:
        """Whether the MAC is the data's under the HMAC key (computed in the HSM, compared in constant time)."""
        uid = call.uid(payload.unique_identifier)
        data = self._sized(payload.data)
        if payload.mac_data is None:
            raise KmipRefusal(Reason.MISSING_DATA, "MACVerify needs the MAC")

        async def attempt(snapshot: Snapshot) -> bool:
            key = await visible_key(snapshot, call, uid)
            if key.kmip_state is not KmipState.ACTIVE:
                raise KeyDisabled(f"the key is {key.kmip_state.value.replace('_', '-')}: only an active key is used")
            checked = await self._crypto.verify_mac(
                snapshot, call.principal, key.id, data, payload.mac_data, framed=False
            )
            call.key_version = checked.key_version
            return checked.valid

        return MacVerified(uid, await self._used(call, attempt))

    async def _used(self, call: KmipCall, attempt: Callable[[Snapshot], Awaitable[Any]]) -> Any:
        """``attempt`` run on validated lookups, its success record committed before it answers."""
        return await run_validated(self._cache, self._audit, attempt, lambda _: call.success())

    async def _label(self, snapshot: Snapshot, call: KmipCall, uid: str, operation: Operation) -> str:
        """The AES object of key ``uid`` if the caller may use it for ``operation`` now."""
        key = await visible_key(snapshot, call, uid)
        if key.kmip_state is not KmipState.ACTIVE:  # an error a stale cache may explain: read afresh
            raise KeyDisabled(f"the key is {key.kmip_state.value.replace('_', '-')}: only an active key is used")
        usable(key, call.principal, operation)
        if key.algorithm not in KMIP_AES:
            raise invalid(f"an {key.algorithm.value} key is not a KMIP symmetric key (AES-GCM keys of the table are)")
        mask = key.kmip_attributes.get("usage_mask")
        if mask is not None and not int(mask) & _MASK_BITS[operation]:
            raise denied(f"the key's Cryptographic Usage Mask does not allow {operation.value}")
        version = key.versions[key.primary_version]
        call.key_version = version.version
        assert version.hsm.enc_label is not None
        return version.hsm.enc_label

    def _sized(self, data: bytes | None) -> bytes:
        if data is None:
            raise KmipRefusal(Reason.MISSING_DATA, "the request carries no data")
        if len(data) > self._max:
            raise invalid(f"data is limited to {self._max} bytes")
        return bytes(data)


async def visible_key(snapshot: Snapshot, call: KmipCall, uid: str) -> Key:
    """The key ``uid`` if the caller may see it; ItemNotFound alike for a key it may not see."""
    try:
        key = visible(await snapshot.key(uid), call.principal)
    except (KeyNotFound, Forbidden):  # alike; and errors a stale cache may explain
        raise KeyNotFound(NO_OBJECT) from None
    call.key_id = key.id
    return key


def _kmip_encrypt(
    token: Token, mode: Mode, label: str, iv: bytes | None, data: bytes, aad: bytes
) -> tuple[bytes, bytes, bytes | None]:
    """On the HSM thread (its metrics label: ``kmip_encrypt``): the IV (``iv``, else a new one),
    the ciphertext and GCM's tag. A new IV is made here, as the native encrypt makes its own, not
    on the event loop: ``os.urandom`` lets go of the GIL, and the HSM and audit threads waiting for
    it then take it one job at a time instead of in batches."""
    if iv is None:
        iv = secrets.token_bytes(GCM_IV_BYTES if mode.gcm else CBC_IV_BYTES)
    if mode.gcm:
        sealed, tag = block_cipher.gcm_encrypt(token, label, iv, data, aad, mode.tag_bytes)
        return iv, sealed, tag
    return iv, block_cipher.cbc_pad_encrypt(token, label, iv, data), None


def _mode(parameters: Any) -> Mode:
    """The mode the Cryptographic Parameters name (none: AES-CBC with PKCS5 padding); refused by name otherwise."""
    if parameters is None:
        return Mode(gcm=False)
    algorithm = parameters.cryptographic_algorithm
    if algorithm is not None and algorithm != enums.CryptographicAlgorithm.AES:
        raise invalid(f"only AES is offered for Encrypt and Decrypt, not {algorithm.name}")
    block = parameters.block_cipher_mode
    if block in (None, enums.BlockCipherMode.CBC):
        padding = parameters.padding_method
        if padding not in (None, enums.PaddingMethod.PKCS5):
            raise invalid(f"AES-CBC is offered with PKCS5 padding only, not {padding.name}")
        return Mode(gcm=False)
    if block == enums.BlockCipherMode.GCM:
        tag = parameters.tag_length or 16
        if tag not in GCM_TAG_BYTES:
            raise invalid("an AES-GCM tag is 12 to 16 bytes")
        return Mode(gcm=True, tag_bytes=tag)
    raise invalid(f"the block cipher mode {block.name} is not offered (CBC with PKCS5 padding and GCM are)")


def _iv(given: bytes, mode: Mode) -> bytes:
    size = GCM_IV_BYTES if mode.gcm else CBC_IV_BYTES
    if len(given) != size:
        raise invalid(f"the IV/Counter/Nonce of AES-{'GCM' if mode.gcm else 'CBC'} is {size} bytes")
    return bytes(given)
