"""Raw block-cipher modes: a key's AES output as the cipher gives it, in no ciphertext format of
ours, for a door whose protocol defines the mode and carries the IV, AAD and tag itself (KMIP's
Encrypt and Decrypt translate into these two operations and keep no rule of their own).

The rules are every other use's, kept here once:

- the key must be active (its lifecycle state) and usable by the caller for the operation
  (``services/key_use.py`` ``usable`` with ``raw``: a raw AES-CBC-PAD key serves only here);
- it must be an AES key of one AES object (``AES_*_GCM`` or ``AES_*_CBC_PAD``), used in its spec's
  mode only — one key, one mode (issue 41): a mode asked for other than the key's is refused naming
  the key's;
- its Cryptographic Usage Mask, when a client set one (a key attribute, KMIP's bits), must allow
  the operation;
- the plaintext limit of every encryption;
- the IV of every encryption is the server's, made where the encryption is made, on the HSM thread
  (a caller's nonce on a GCM key turned ``encrypt`` into ``decrypt`` of every other ciphertext);
  decryption takes the IV the encryption answered;
- every failure of a decryption (ciphertext, IV, tag, AAD) is ``DecryptionFailed``, alike, and a
  GCM tag shorter than the encryption's is one too.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from keymanager.domain.key_specs import ONE_AES_OBJECT, BlockMode, spec_of
from keymanager.domain.models import Key, Lifecycle, Principal
from keymanager.domain.policy import Operation
from keymanager.errors import DecryptionFailed, Forbidden, InvalidRequest, KeyDisabled, MissingField, WrongKeyUsage
from keymanager.hsm import Hsm, block_cipher
from keymanager.hsm.token import Token
from keymanager.services.key_use import usable

CBC_IV_BYTES = 16
GCM_IV_BYTES = 12
GCM_TAG_BYTES = (12, 13, 14, 15, 16)
USAGE_MASK_BITS = {Operation.ENCRYPT: 0x04, Operation.DECRYPT: 0x08}
"""The bits of a Cryptographic Usage Mask (KMIP's values, the key attribute ``usage_mask``) each
operation needs."""


@dataclass(frozen=True)
class RawMode:
    """A raw mode: AES-CBC with PKCS5 padding, or AES-GCM with a tag of ``tag_bytes``."""

    gcm: bool
    tag_bytes: int = 16

    @property
    def name(self) -> str:
        """The mode as an error names it."""
        return "AES-GCM" if self.gcm else "AES-CBC with PKCS5 padding"

    @property
    def iv_bytes(self) -> int:
        """The length of the mode's IV or nonce."""
        return GCM_IV_BYTES if self.gcm else CBC_IV_BYTES


def gcm(tag_bytes: int = 16) -> RawMode:
    """AES-GCM with a tag of ``tag_bytes``; InvalidRequest unless it is 12 to 16."""
    if tag_bytes not in GCM_TAG_BYTES:
        raise InvalidRequest("an AES-GCM tag is 12 to 16 bytes")
    return RawMode(gcm=True, tag_bytes=tag_bytes)


CBC_PAD = RawMode(gcm=False)
KEY_MODES = {BlockMode.CBC_PAD: CBC_PAD, BlockMode.GCM: RawMode(gcm=True)}
"""The raw mode of each spec mode of one AES object (a GCM tag's length is the caller's)."""


@dataclass(frozen=True)
class RawSealed:
    """What a raw encryption answers: the server's IV, the ciphertext, GCM's tag, the key version."""

    iv: bytes
    sealed: bytes
    tag: bytes | None
    key_version: int


@dataclass(frozen=True)
class RawOpened:
    """What a raw decryption answers: the plaintext and the key version it used."""

    plaintext: bytes
    key_version: int


class RawCipher:
    """The raw modes of the crypto service (see the module docstring)."""

    def __init__(self, hsm: Hsm, *, max_plaintext_bytes: int) -> None:
        self._hsm = hsm
        self._max = max_plaintext_bytes

    async def encrypt(
        self, key: Key, principal: Principal, asked: RawMode | None, data: bytes, aad: bytes
    ) -> RawSealed:
        """``data`` sealed under ``key`` in its mode (``asked``: the mode the caller named, None for
        none), authenticating ``aad`` (GCM only), under an IV made here."""
        self.sized(data)
        label, mode, version = self._used(key, principal, Operation.ENCRYPT, asked)
        if not mode.gcm and aad:
            raise InvalidRequest("AES-CBC takes no Authenticated Encryption Additional Data")
        iv, sealed, tag = await self._hsm.acall(_raw_encrypt, mode, label, data, aad)
        return RawSealed(iv, sealed, tag, version)

    async def decrypt(
        self, key: Key, principal: Principal, asked: RawMode | None, iv: bytes, data: bytes, aad: bytes, tag: bytes
    ) -> RawOpened:
        """The plaintext of a raw encryption under ``key`` with ``iv`` (and GCM's ``aad`` and ``tag``);
        DecryptionFailed for every failure of them."""
        self.sized(data)
        label, mode, version = self._used(key, principal, Operation.DECRYPT, asked)
        if len(iv) != mode.iv_bytes:
            raise InvalidRequest(f"the IV/Counter/Nonce of AES-{'GCM' if mode.gcm else 'CBC'} is {mode.iv_bytes} bytes")
        if not mode.gcm:
            return RawOpened(await self._hsm.acall(block_cipher.cbc_pad_decrypt, label, iv, data), version)
        if len(tag) not in GCM_TAG_BYTES:
            raise MissingField("an AES-GCM decryption needs the authenticated encryption tag")
        if len(tag) != mode.tag_bytes:  # a tag cut short is a forgery's shortcut: as a bad tag
            raise DecryptionFailed()
        opened: bytes = await self._hsm.acall(block_cipher.gcm_decrypt, label, iv, data, aad, tag)
        return RawOpened(opened, version)

    def sized(self, data: bytes) -> None:
        """InvalidRequest when ``data`` is over the plaintext limit."""
        if len(data) > self._max:
            raise InvalidRequest(f"data is limited to {self._max} bytes")

    @staticmethod
    def _used(key: Key, principal: Principal, operation: Operation, asked: RawMode | None) -> tuple[str, RawMode, int]:
        """The AES object of ``key``'s primary version, the mode it is used in and the version, if
        ``principal`` may use it for ``operation`` now in the mode it ``asked``."""
        require_active(key)
        usable(key, principal, operation, raw=True)
        spec = spec_of(key.algorithm)
        if spec.mode not in ONE_AES_OBJECT:
            raise WrongKeyUsage(f"an {key.algorithm.value} key has no raw mode (AES-GCM and AES-CBC-PAD keys have)")
        own = KEY_MODES[spec.mode]
        if asked is not None and asked.gcm is not own.gcm:
            raise InvalidRequest(f"the key is {key.algorithm.value}: it is used in {own.name} only, not {asked.name}")
        mask = key.attributes.get("usage_mask")
        if mask is not None and not int(mask) & USAGE_MASK_BITS[operation]:
            raise Forbidden(f"the key's Cryptographic Usage Mask does not allow {operation.value}")
        version = key.versions[key.primary_version]
        assert version.hsm.enc_label is not None
        return version.hsm.enc_label, asked or own, version.version


def require_active(key: Key) -> None:
    """KeyDisabled naming the key's lifecycle state unless it is active (pre-active, deactivated,
    compromised and destroyed keys are not used)."""
    if key.lifecycle_state is not Lifecycle.ACTIVE:
        raise KeyDisabled(f"the key is {key.lifecycle_state.value.replace('_', '-')}: only an active key is used")


def _raw_encrypt(token: Token, mode: RawMode, label: str, data: bytes, aad: bytes) -> tuple[bytes, bytes, bytes | None]:
    """On the HSM thread (its metrics label: ``raw_encrypt``): a new IV, the ciphertext and GCM's
    tag. The IV is made here, as the native encrypt makes its own, not on the event loop:
    ``os.urandom`` lets go of the GIL, and the HSM and audit threads waiting for it then take it
    one job at a time instead of in batches."""
    iv = secrets.token_bytes(mode.iv_bytes)
    if mode.gcm:
        sealed, tag = block_cipher.gcm_encrypt(token, label, iv, data, aad, mode.tag_bytes)
        return iv, sealed, tag
    return iv, block_cipher.cbc_pad_encrypt(token, label, iv, data), None
