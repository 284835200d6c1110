"""Encrypt and Decrypt (and MAC, MACVerify) of the KMIP door, with the keys of the services.

KMIP names the mode and the AAD, and gets the block cipher's output as it is, so these run the
HSM's AES on the key's AES object (``hsm/block_cipher.py``), not our ciphertext format. One key,
one mode (issue 41): a key is used only in the mode of its spec, a raw AES-CBC-PAD key
(``AES_*_CBC_PAD``, what KMIP's Create makes unless its Cryptographic Parameters name GCM) in
AES-CBC with PKCS5 padding, an AES-GCM key (``AES_*_GCM``) in GCM with its AAD and a tag of 12 to
16 bytes; Cryptographic Parameters naming another mode are Invalid Field naming the key's. The IV
or nonce of an encryption is always the server's, made where the encryption is made and answered
(as libmongocrypt's delegated mode expects): an Encrypt that names an IV/Counter/Nonce, or asks
for a non-random one, is Invalid Field (a caller's nonce on a GCM key turned ``encrypt`` into
``decrypt`` of every other ciphertext of the key). Decryption takes the IV from the request, as
KMIP defines. The key must be Active, its policy naming the caller for ``encrypt`` or ``decrypt``
(``services/key_use.py`` ``usable``, which keeps raw keys from every other use), and its
Cryptographic Usage Mask, when a client set one, must hold the operation's bit. Every use commits
its success record through ``run_validated``. Every failure of a decryption answers the same
Cryptographic Failure.
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

from keymanager.domain.key_specs import BlockMode, spec_of
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


_KEY_MODES = {BlockMode.CBC_PAD: Mode(gcm=False), BlockMode.GCM: Mode(gcm=True)}
"""The mode each spec mode KMIP serves is used in (a GCM tag length is the request's)."""


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
        asked = _mode(payload.cryptographic_parameters)
        data = self._sized(payload.data)
        if payload.iv_counter_nonce is not None:
            raise invalid("IV/Counter/Nonce: the server makes the IV of every encryption; an Encrypt may not name one")
        if getattr(payload.cryptographic_parameters, "random_iv", None) is False:
            raise invalid("Random IV: the server makes a random IV for every encryption; it cannot be turned off")
        aad = bytes(payload.auth_additional_data or b"")

        async def attempt(snapshot: Snapshot) -> tuple[bytes, bytes, bytes | None]:
            label, mode = await self._label(snapshot, call, uid, Operation.ENCRYPT, asked)
            if not mode.gcm and aad:
                raise invalid("AES-CBC takes no Authenticated Encryption Additional Data")
            return await self._hsm.acall(_kmip_encrypt, mode, label, data, aad)

        used_iv, sealed, tag = await self._used(call, attempt)
        return payloads.EncryptResponsePayload(
            unique_identifier=uid, data=sealed, iv_counter_nonce=used_iv, auth_tag=tag
        )

    async def decrypt(self, call: KmipCall, payload: payloads.DecryptRequestPayload) -> payloads.DecryptResponsePayload:
        """The plaintext; Cryptographic Failure for every failure of the ciphertext, IV, tag or AAD."""
        uid = call.uid(payload.unique_identifier)
        asked = _mode(payload.cryptographic_parameters)
        data = self._sized(payload.data)
        if payload.iv_counter_nonce is None:
            raise KmipRefusal(Reason.MISSING_DATA, "Decrypt needs the IV/Counter/Nonce the encryption used")
        given = bytes(payload.iv_counter_nonce)
        aad = bytes(payload.auth_additional_data or b"")
        tag = bytes(payload.auth_tag or b"")

        async def attempt(snapshot: Snapshot) -> bytes:
            label, mode = await self._label(snapshot, call, uid, Operation.DECRYPT, asked)
            iv = _iv(given, mode)
            if mode.gcm and len(tag) not in GCM_TAG_BYTES:
                raise KmipRefusal(Reason.MISSING_DATA, "an AES-GCM decryption needs the authenticated encryption tag")
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

    async def _label(
        self, snapshot: Snapshot, call: KmipCall, uid: str, operation: Operation, asked: Mode | None
    ) -> tuple[str, Mode]:
        """The AES object of key ``uid`` and the mode it is used in, if the caller may use it for
        ``operation`` now in the mode it ``asked`` (None: named none, the key's own)."""
        key = await visible_key(snapshot, call, uid)
        if key.kmip_state is not KmipState.ACTIVE:  # an error a stale cache may explain: read afresh
            raise KeyDisabled(f"the key is {key.kmip_state.value.replace('_', '-')}: only an active key is used")
        usable(key, call.principal, operation, raw=True)
        if key.algorithm not in KMIP_AES:
            raise invalid(f"an {key.algorithm.value} key is not a KMIP symmetric key (AES-GCM and AES-CBC-PAD are)")
        own = _KEY_MODES[spec_of(key.algorithm).mode or BlockMode.GCM]
        if asked is not None and asked.gcm is not own.gcm:
            raise invalid(f"the key is {key.algorithm.value}: it is used in {_name(own)} only, not {_name(asked)}")
        mode = asked or own
        mask = key.kmip_attributes.get("usage_mask")
        if mask is not None and not int(mask) & _MASK_BITS[operation]:
            raise denied(f"the key's Cryptographic Usage Mask does not allow {operation.value}")
        version = key.versions[key.primary_version]
        call.key_version = version.version
        assert version.hsm.enc_label is not None
        return version.hsm.enc_label, mode

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


def _kmip_encrypt(token: Token, mode: Mode, label: str, data: bytes, aad: bytes) -> tuple[bytes, bytes, bytes | None]:
    """On the HSM thread (its metrics label: ``kmip_encrypt``): a new IV, the ciphertext and GCM's
    tag. The IV is made here, as the native encrypt makes its own, not on the event loop:
    ``os.urandom`` lets go of the GIL, and the HSM and audit threads waiting for it then take it
    one job at a time instead of in batches."""
    iv = secrets.token_bytes(GCM_IV_BYTES if mode.gcm else CBC_IV_BYTES)
    if mode.gcm:
        sealed, tag = block_cipher.gcm_encrypt(token, label, iv, data, aad, mode.tag_bytes)
        return iv, sealed, tag
    return iv, block_cipher.cbc_pad_encrypt(token, label, iv, data), None


def _name(mode: Mode) -> str:
    return "AES-GCM" if mode.gcm else "AES-CBC with PKCS5 padding"


def _mode(parameters: Any) -> Mode | None:
    """The mode the Cryptographic Parameters name (None: none named, the key's own); refused by name otherwise."""
    if parameters is None:
        return None
    algorithm = parameters.cryptographic_algorithm
    if algorithm is not None and algorithm != enums.CryptographicAlgorithm.AES:
        raise invalid(f"only AES is offered for Encrypt and Decrypt, not {algorithm.name}")
    block = parameters.block_cipher_mode
    if block is None:
        if parameters.padding_method not in (None, enums.PaddingMethod.PKCS5):
            raise invalid(f"AES-CBC is offered with PKCS5 padding only, not {parameters.padding_method.name}")
        return None if parameters.tag_length is None else Mode(gcm=True, tag_bytes=_tag(parameters.tag_length))
    if block == enums.BlockCipherMode.CBC:
        padding = parameters.padding_method
        if padding not in (None, enums.PaddingMethod.PKCS5):
            raise invalid(f"AES-CBC is offered with PKCS5 padding only, not {padding.name}")
        return Mode(gcm=False)
    if block == enums.BlockCipherMode.GCM:
        return Mode(gcm=True, tag_bytes=_tag(parameters.tag_length or 16))
    raise invalid(f"the block cipher mode {block.name} is not offered (CBC with PKCS5 padding and GCM are)")


def _tag(length: int) -> int:
    if length not in GCM_TAG_BYTES:
        raise invalid("an AES-GCM tag is 12 to 16 bytes")
    return length


def _iv(given: bytes, mode: Mode) -> bytes:
    size = GCM_IV_BYTES if mode.gcm else CBC_IV_BYTES
    if len(given) != size:
        raise invalid(f"the IV/Counter/Nonce of AES-{'GCM' if mode.gcm else 'CBC'} is {size} bytes")
    return bytes(given)
