"""FF1 tokens with the AES key in the HSM: key versions that can only encrypt, and FF1's PRF as PKCS#11 calls.

FF1 (:mod:`keymanager.domain.ff1`) is pure code; its PRF is a CBC-MAC, here one ``CKM_AES_CBC``
encryption with a zero IV over the round's block string, of which the last block is kept: one
PKCS#11 operation (``C_EncryptInit`` + ``C_Encrypt``) per Feistel round, ten per FF1 call for any
value up to about 56 digits. FF1 needs only the forward cipher, so an FF1 key version is an
AES-256 object with ``CKA_ENCRYPT`` and nothing else (no decrypt, wrap, unwrap, sign, derive),
sensitive and non-extractable (:data:`~keymanager.hsm.templates.AES_ENCRYPT_ONLY_TEMPLATE`, made by
``Hsm.generate_version(..., Algorithm.FF1_AES_256)``); no software AES ever holds it.

Every tokenization runs whole on the process's HSM thread through :meth:`Hsm.call` /
:meth:`Hsm.acall` (one trip per value, or per batch), like every other PKCS#11 call. Values
are checked against the token format before the trip, so a refused value never queues.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pkcs11 import Mechanism

from keymanager.domain import tokens
from keymanager.domain.ff1 import FF1, Prf
from keymanager.domain.models import HsmObjects
from keymanager.domain.tokens import TokenFormat
from keymanager.errors import InvalidRequest
from keymanager.hsm.adapter import Hsm

_ZERO_IV = bytes(16)


def tokenize(hsm: Hsm, objects: HsmObjects, fmt: TokenFormat, value: str, tweak: bytes) -> str:
    """The token of ``value`` under the version ``objects`` (see :func:`keymanager.domain.tokens.tokenize`)."""
    tokens.check_value(fmt, value)
    return hsm.call(_tokenize, _label(objects), fmt, value, tweak)


def detokenize(hsm: Hsm, objects: HsmObjects, fmt: TokenFormat, token: str, tweak: bytes) -> str:
    """The value of ``token`` under the version ``objects``; InvalidRequest if it cannot be a token of ``fmt``."""
    tokens.check_token(fmt, token)
    return hsm.call(_detokenize, _label(objects), fmt, token, tweak)


async def atokenize(hsm: Hsm, objects: HsmObjects, fmt: TokenFormat, value: str, tweak: bytes) -> str:
    """:func:`tokenize` for the event loop."""
    tokens.check_value(fmt, value)
    return await hsm.acall(_tokenize, _label(objects), fmt, value, tweak)


async def adetokenize(hsm: Hsm, objects: HsmObjects, fmt: TokenFormat, token: str, tweak: bytes) -> str:
    """:func:`detokenize` for the event loop."""
    tokens.check_token(fmt, token)
    return await hsm.acall(_detokenize, _label(objects), fmt, token, tweak)


async def atokenize_many(
    hsm: Hsm, objects: HsmObjects, fmt: TokenFormat, items: Sequence[tuple[str, bytes]]
) -> list[str | InvalidRequest]:
    """Tokens of each ``(value, tweak)`` in one trip to the HSM thread; a refused value gives its error."""
    return await hsm.acall(_many, _label(objects), fmt, items, True)


async def adetokenize_many(
    hsm: Hsm, objects: HsmObjects, fmt: TokenFormat, items: Sequence[tuple[str, bytes]]
) -> list[str | InvalidRequest]:
    """Values of each ``(token, tweak)`` in one trip to the HSM thread; a refused token gives its error."""
    return await hsm.acall(_many, _label(objects), fmt, items, False)


def ff1_encrypt_text(hsm: Hsm, objects: HsmObjects, radix: int, text: str, tweak: bytes) -> str:
    """Plain FF1.Encrypt of ``text`` (no token format): for known-answer tests such as NIST's samples."""
    return hsm.call(_ff1_text, _label(objects), radix, text, tweak, True)


def ff1_decrypt_text(hsm: Hsm, objects: HsmObjects, radix: int, text: str, tweak: bytes) -> str:
    """Plain FF1.Decrypt of ``text``; the inverse of :func:`ff1_encrypt_text`."""
    return hsm.call(_ff1_text, _label(objects), radix, text, tweak, False)


def _label(objects: HsmObjects) -> str:
    if objects.enc_label is None:
        raise InvalidRequest("the key version has no FF1 key")
    return objects.enc_label


# -- work done on the HSM thread ------------------------------------------------------


def hsm_prf(token: Any, label: str) -> Prf:
    """FF1's PRF under the key ``label``: ``CKM_AES_CBC``, zero IV, the last block. Call on the HSM thread."""
    key = token.key(label)

    def prf(data: bytes) -> bytes:
        return bytes(key.encrypt(data, mechanism=Mechanism.AES_CBC, mechanism_param=_ZERO_IV))[-16:]

    return prf


def _tokenize(token: Any, label: str, fmt: TokenFormat, value: str, tweak: bytes) -> str:
    return tokens.tokenize(FF1(hsm_prf(token, label), fmt.radix), fmt, value, tweak)


def _detokenize(token: Any, label: str, fmt: TokenFormat, value: str, tweak: bytes) -> str:
    return tokens.detokenize(FF1(hsm_prf(token, label), fmt.radix), fmt, value, tweak)


def _many(
    token: Any, label: str, fmt: TokenFormat, items: Sequence[tuple[str, bytes]], forward: bool
) -> list[str | InvalidRequest]:
    ff1 = FF1(hsm_prf(token, label), fmt.radix)
    apply = tokens.tokenize if forward else tokens.detokenize
    results: list[str | InvalidRequest] = []
    for text, tweak in items:
        try:
            results.append(apply(ff1, fmt, text, tweak))
        except InvalidRequest as exc:
            results.append(exc)
    return results


def _ff1_text(token: Any, label: str, radix: int, text: str, tweak: bytes, forward: bool) -> str:
    ff1 = FF1(hsm_prf(token, label), radix)
    return ff1.encrypt_text(text, tweak) if forward else ff1.decrypt_text(text, tweak)
