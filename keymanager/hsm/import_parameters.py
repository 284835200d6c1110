"""Import parameters (AWS KMS's ``GetParametersForImport``): RSA wrapping key pairs made in the HSM.

``make_parameters`` generates an RSA key pair in the HSM: the private half a token object that can only
unwrap (no decrypt, sign or derive), sensitive and non-extractable; the public half a session object,
read out as DER and destroyed. The import token names the private key's label, which carries the key
id, the wrapping algorithm and the expiry, so no state is kept outside the HSM and a forged token finds
no object. What a caller wraps under it is unwrapped by :mod:`keymanager.hsm.key_import`, which
destroys the wrapping key (one use) once an import succeeded. Every PKCS#11 call runs on the HSM thread
through :meth:`Hsm.call`.

Wrapping algorithms (AWS names), each offered only when the token has its mechanisms
(:data:`keymanager.hsm.capabilities.FEATURES`):

* ``RSAES_OAEP_SHA_1``: the material RSA-OAEP-encrypted (SHA-1, MGF1-SHA-1).
* ``RSA_AES_KEY_WRAP_SHA_1``: an ephemeral AES key RSA-OAEP-encrypted (SHA-1), followed by the
  material wrapped under it with AES key wrap with padding (RFC 5649).

(SoftHSM answers ``CKR_ARGUMENTS_BAD`` to OAEP with SHA-256, so the ``*_SHA_256`` variants are not offered.)
"""

from __future__ import annotations

import contextlib
import enum
import secrets
import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicNumbers
from pkcs11 import Attribute, KeyType, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.errors import Conflict, InvalidRequest
from keymanager.hsm.adapter import Hsm
from keymanager.hsm.readback import check_object
from keymanager.hsm.templates import RSA_UNWRAP_PRIVATE_TEMPLATE, RSA_UNWRAP_PUBLIC_TEMPLATE

PARAMETERS_SECONDS = 24 * 3600
"""Import parameters (the wrapping key pair) are valid for 24 hours."""
RSA_BITS = 2048
MAX_OUTSTANDING = 10
"""Unexpired, unused import parameters a key may have at once (each is an object in the token)."""
_PREFIX = "km/import/"


class WrappingAlgorithm(enum.StrEnum):
    RSAES_OAEP_SHA_1 = "RSAES_OAEP_SHA_1"
    RSA_AES_KEY_WRAP_SHA_1 = "RSA_AES_KEY_WRAP_SHA_1"

    @property
    def feature(self) -> str:
        """Its name in :data:`~keymanager.hsm.capabilities.FEATURES`."""
        return f"import {self.value}"


@dataclass(frozen=True)
class ImportParameters:
    public_key: bytes
    """DER SubjectPublicKeyInfo of the RSA wrapping key."""
    import_token: str
    expires_at: int
    """Unix time."""


def wrapping_algorithms(hsm: Hsm) -> list[WrappingAlgorithm]:
    """The wrapping algorithms this token supports (the only ones import parameters offer)."""
    capabilities = hsm.capabilities()
    return [a for a in WrappingAlgorithm if capabilities.has(a.feature)]


def make_parameters(hsm: Hsm, key_id: str, algorithm: WrappingAlgorithm, now: float | None = None) -> ImportParameters:
    """A fresh RSA wrapping key pair for key ``key_id`` (expired pairs of that key are destroyed first);
    InvalidRequest naming the mechanism when the token lacks ``algorithm``'s."""
    hsm.require(algorithm.feature)
    moment = int(now if now is not None else time.time())
    expires = moment + PARAMETERS_SECONDS
    token = f"{algorithm.value}.{expires}.{secrets.token_hex(16)}"
    der = hsm.call(_make_pair, key_id, wrapping_key_label(key_id, token), moment)
    return ImportParameters(public_key=der, import_token=token, expires_at=expires)


def parse_token(token: str) -> tuple[WrappingAlgorithm, int]:
    """The wrapping algorithm and expiry (Unix time) an import token names; InvalidRequest for no import token."""
    parts = token.split(".")
    try:
        if len(parts) != 3 or len(parts[2]) != 32 or not parts[1].isdigit():
            raise ValueError
        return WrappingAlgorithm(parts[0]), int(parts[1])
    except ValueError:
        raise InvalidRequest("import_token is not an import token of this service") from None


def wrapping_key_label(key_id: str, token: str) -> str:
    """The label of the private wrapping key that import token ``token`` of key ``key_id`` names."""
    return f"{_PREFIX}{key_id}/{token}"


# -- work done on the HSM thread ------------------------------------------------------


def _make_pair(token: Any, key_id: str, label: str, now: int) -> bytes:
    session = token.session()
    if _destroy_expired(session, key_id, now) >= MAX_OUTSTANDING:
        raise Conflict(f"a key has at most {MAX_OUTSTANDING} unused import parameters at once: use or let expire")
    public, private = session.generate_keypair(
        KeyType.RSA,
        RSA_BITS,
        label=label,
        store=False,
        public_template=RSA_UNWRAP_PUBLIC_TEMPLATE,
        private_template=RSA_UNWRAP_PRIVATE_TEMPLATE,
    )
    try:
        check_object(private, RSA_UNWRAP_PRIVATE_TEMPLATE)
        numbers = RSAPublicNumbers(
            int.from_bytes(public[Attribute.PUBLIC_EXPONENT], "big"), int.from_bytes(public[Attribute.MODULUS], "big")
        )
        return numbers.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    finally:
        with contextlib.suppress(p11.PKCS11Error):
            public.destroy()


def _destroy_expired(session: Any, key_id: str, now: int) -> int:
    """Destroy the key's expired wrapping keys; how many unexpired ones remain."""
    prefix, remaining = f"{_PREFIX}{key_id}/", 0
    for obj in list(session.get_objects({Attribute.CLASS: ObjectClass.PRIVATE_KEY, Attribute.TOKEN: True})):
        label = obj[Attribute.LABEL]
        if label.startswith(prefix):
            with contextlib.suppress(InvalidRequest, p11.PKCS11Error):
                if parse_token(label[len(prefix) :])[1] <= now:
                    obj.destroy()
                else:
                    remaining += 1
    return remaining
