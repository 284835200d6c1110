"""AES in the modes a protocol names itself (KMIP's Encrypt and Decrypt): no header, no MAC of ours.

The ciphertext formats of :mod:`keymanager.hsm.operations` bind every ciphertext to its key and
context; a protocol such as KMIP instead names the mode, the IV and the AAD and gets the block
cipher's output as it is (``doors/kmip/crypto.py``). Each function takes the token first and
runs on the HSM thread through :meth:`Dispatcher.acall <keymanager.hsm.dispatch.Dispatcher.acall>`
with the AES object's label. Decryption raises DecryptionFailed for every failure of the
ciphertext (bad padding, bad tag, bad length): they all look the same.
"""

from __future__ import annotations

import pkcs11
from pkcs11 import Mechanism
from pkcs11 import exceptions as p11

from keymanager.errors import DecryptionFailed
from keymanager.hsm.token import LOST, Token

BLOCK_BYTES = 16


def cbc_pad_encrypt(token: Token, label: str, iv: bytes, data: bytes) -> bytes:
    """AES-CBC of ``data`` with PKCS#7 (PKCS5) padding under ``iv`` (16 bytes)."""
    return bytes(token.key(label).encrypt(bytes(data), mechanism=Mechanism.AES_CBC_PAD, mechanism_param=bytes(iv)))


def cbc_pad_decrypt(token: Token, label: str, iv: bytes, data: bytes) -> bytes:
    """The plaintext of :func:`cbc_pad_encrypt`'s output; DecryptionFailed for any failure of it."""
    aes = token.key(label)  # before any check of the data: a missing key answers alike
    if not data or len(data) % BLOCK_BYTES:
        raise DecryptionFailed()
    try:
        return bytes(aes.decrypt(bytes(data), mechanism=Mechanism.AES_CBC_PAD, mechanism_param=bytes(iv)))
    except LOST:
        raise
    except p11.PKCS11Error:
        raise DecryptionFailed() from None


def gcm_encrypt(token: Token, label: str, iv: bytes, data: bytes, aad: bytes, tag_bytes: int) -> tuple[bytes, bytes]:
    """AES-GCM of ``data`` under ``iv``, authenticating ``aad``: the ciphertext and its tag of ``tag_bytes``."""
    params = pkcs11.GCMParams(bytes(iv), bytes(aad), tag_bytes * 8)
    sealed = bytes(token.key(label).encrypt(bytes(data), mechanism=Mechanism.AES_GCM, mechanism_param=params))
    return sealed[:-tag_bytes], sealed[-tag_bytes:]


def gcm_decrypt(token: Token, label: str, iv: bytes, data: bytes, aad: bytes, tag: bytes) -> bytes:
    """The plaintext of :func:`gcm_encrypt`'s output; DecryptionFailed for any failure of it."""
    aes = token.key(label)
    params = pkcs11.GCMParams(bytes(iv), bytes(aad), len(tag) * 8)
    try:
        return bytes(aes.decrypt(bytes(data) + bytes(tag), mechanism=Mechanism.AES_GCM, mechanism_param=params))
    except LOST:
        raise
    except p11.PKCS11Error:
        raise DecryptionFailed() from None
