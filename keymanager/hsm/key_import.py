"""Bring your own key: RSA wrapping key pairs made in the HSM, and key material unwrapped inside it.

Shaped like AWS KMS's import. ``make_parameters`` generates an RSA key pair in the HSM: the
private half a token object that can only unwrap (no decrypt, sign or derive), sensitive and
non-extractable; the public half a session object, read out as DER and destroyed. The import
token names the private key's label, which carries the key id, the wrapping algorithm and the
expiry, so no state is kept outside the HSM and a forged token finds no object. ``unwrap_version``
unwraps (``C_UnwrapKey``) straight into a token object with the key version's template and label,
so the material never exists in clear in this process; the wrapping key is then destroyed (one
use). Every PKCS#11 call runs on the HSM thread through :meth:`Hsm.call`.

Wrapping algorithms (AWS names; what SoftHSM 2.6.1 can unwrap):

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

from pkcs11 import MGF, Attribute, KeyType, Mechanism, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain.models import HMAC_KEY_BITS, Algorithm, HsmObjects
from keymanager.errors import Conflict, InvalidRequest
from keymanager.hsm.adapter import Hsm
from keymanager.hsm.templates import AES_ENCRYPT_ONLY_TEMPLATE, AES_TEMPLATE, HMAC_TEMPLATE, version_labels

PARAMETERS_SECONDS = 24 * 3600
"""Import parameters (the wrapping key pair) are valid for 24 hours."""
RSA_BITS = 2048
MAX_OUTSTANDING = 10
"""Unexpired, unused import parameters a key may have at once (each is an object in the token)."""
_OAEP_SHA1 = (Mechanism.SHA_1, MGF.SHA1, None)
_PREFIX = "km/import/"


class WrappingAlgorithm(enum.StrEnum):
    RSAES_OAEP_SHA_1 = "RSAES_OAEP_SHA_1"
    RSA_AES_KEY_WRAP_SHA_1 = "RSA_AES_KEY_WRAP_SHA_1"


@dataclass(frozen=True)
class ImportParameters:
    public_key: bytes
    """DER SubjectPublicKeyInfo of the RSA wrapping key."""
    import_token: str
    expires_at: int
    """Unix time."""


_PRIVATE_TEMPLATE: dict[Attribute, Any] = {
    Attribute.TOKEN: True,
    Attribute.PRIVATE: True,
    Attribute.SENSITIVE: True,
    Attribute.EXTRACTABLE: False,
    Attribute.UNWRAP: True,
    Attribute.DECRYPT: False,
    Attribute.SIGN: False,
    Attribute.DERIVE: False,
}
_PUBLIC_TEMPLATE: dict[Attribute, Any] = {
    Attribute.TOKEN: False,
    Attribute.ENCRYPT: False,
    Attribute.WRAP: False,
    Attribute.VERIFY: False,
}


def make_parameters(hsm: Hsm, key_id: str, algorithm: WrappingAlgorithm, now: float | None = None) -> ImportParameters:
    """A fresh RSA wrapping key pair for key ``key_id`` (expired pairs of that key are destroyed first)."""
    moment = int(now if now is not None else time.time())
    expires = moment + PARAMETERS_SECONDS
    token = f"{algorithm.value}.{expires}.{secrets.token_hex(16)}"
    der = hsm.call(_make_pair, key_id, _label(key_id, token), moment)
    return ImportParameters(public_key=der, import_token=token, expires_at=expires)


def unwrap_version(
    hsm: Hsm,
    key_id: str,
    number: int,
    algorithm: Algorithm,
    import_token: str,
    materials: list[bytes],
    now: float | None = None,
) -> HsmObjects:
    """Unwrap ``materials`` (one per object of ``algorithm``'s version) into version ``number``'s objects.

    Raises InvalidRequest for a malformed, unknown or expired token, material of the wrong length
    or that does not unwrap; nothing is left in the token then. On success the wrapping key is gone.
    """
    wrapping = _parse_token(import_token)
    if wrapping[1] <= (now if now is not None else time.time()):
        raise InvalidRequest("the import parameters have expired: ask for new ones")
    objects = version_labels(key_id, number, algorithm, secrets.token_hex(4))
    targets = _targets(algorithm, objects)
    if len(materials) != len(targets):
        raise InvalidRequest(f"{algorithm.value} takes {len(targets)} encrypted key material part(s)")
    hsm.call(_unwrap_all, _label(key_id, import_token), wrapping[0], list(zip(targets, materials, strict=True)))
    return objects


def _parse_token(token: str) -> tuple[WrappingAlgorithm, int]:
    parts = token.split(".")
    try:
        if len(parts) != 3 or len(parts[2]) != 32 or not parts[1].isdigit():
            raise ValueError
        return WrappingAlgorithm(parts[0]), int(parts[1])
    except ValueError:
        raise InvalidRequest("import_token is not an import token of this service") from None


def _label(key_id: str, token: str) -> str:
    return f"{_PREFIX}{key_id}/{token}"


# (label, object class, key type, template, expected CKA_VALUE_LEN) of each object of a version.
_Target = tuple[str, KeyType, dict[Attribute, Any], int]


def _targets(algorithm: Algorithm, objects: HsmObjects) -> list[_Target]:
    aes = AES_ENCRYPT_ONLY_TEMPLATE if algorithm is Algorithm.FF1_AES_256 else AES_TEMPLATE
    out: list[_Target] = []
    if objects.enc_label is not None:
        out.append((objects.enc_label, KeyType.AES, aes, 32))
    if objects.mac_label is not None:
        out.append((objects.mac_label, KeyType.GENERIC_SECRET, HMAC_TEMPLATE, HMAC_KEY_BITS.get(algorithm, 256) // 8))
    return out


# -- work done on the HSM thread ------------------------------------------------------


def _make_pair(token: Any, key_id: str, label: str, now: int) -> bytes:
    session = token.session()
    if _destroy_expired(session, key_id, now) >= MAX_OUTSTANDING:
        raise Conflict(f"a key has at most {MAX_OUTSTANDING} unused import parameters at once: use or let expire")
    public, _private = session.generate_keypair(
        KeyType.RSA,
        RSA_BITS,
        label=label,
        store=False,
        public_template=_PUBLIC_TEMPLATE,
        private_template=_PRIVATE_TEMPLATE,
    )
    try:
        return _spki(bytes(public[Attribute.MODULUS]), bytes(public[Attribute.PUBLIC_EXPONENT]))
    finally:
        public.destroy()


def _destroy_expired(session: Any, key_id: str, now: int) -> int:
    """Destroy the key's expired wrapping keys; how many unexpired ones remain."""
    prefix, remaining = f"{_PREFIX}{key_id}/", 0
    for obj in list(session.get_objects({Attribute.CLASS: ObjectClass.PRIVATE_KEY, Attribute.TOKEN: True})):
        label = obj[Attribute.LABEL]
        if label.startswith(prefix):
            with contextlib.suppress(InvalidRequest, p11.PKCS11Error):
                if _parse_token(label[len(prefix) :])[1] <= now:
                    obj.destroy()
                else:
                    remaining += 1
    return remaining


def _unwrap_all(token: Any, label: str, algorithm: WrappingAlgorithm, parts: list[tuple[_Target, bytes]]) -> None:
    session = token.session()
    found = list(session.get_objects({Attribute.CLASS: ObjectClass.PRIVATE_KEY, Attribute.LABEL: label}))
    if len(found) != 1:
        raise InvalidRequest("import_token is unknown, used already, or for another key")
    wrapping, made = found[0], []
    try:
        for target, blob in parts:
            made.append(_unwrap_one(session, wrapping, algorithm, target, blob))
    except BaseException:
        for obj in made:
            with contextlib.suppress(p11.PKCS11Error):
                obj.destroy()
        raise
    with contextlib.suppress(p11.PKCS11Error):
        wrapping.destroy()


def _unwrap_one(session: Any, wrapping: Any, algorithm: WrappingAlgorithm, target: _Target, blob: bytes) -> Any:
    """Unwrap ``blob`` into a session object, check its length, and copy it into the token object ``target``.

    The length is measured by wrapping the session object under a throwaway AES key (RFC 3394
    output is the input plus 8 bytes), since SoftHSM leaves ``CKA_VALUE_LEN`` 0 on unwrapped keys;
    so that object is extractable for that one wrap, and the token copy is not.
    """
    label, key_type, template, length = target
    staged = {**template, Attribute.TOKEN: False, Attribute.EXTRACTABLE: True}
    try:
        if algorithm is WrappingAlgorithm.RSAES_OAEP_SHA_1:
            obj = _rsa_unwrap(wrapping, key_type, blob, staged)
        else:
            obj = _rsa_aes_unwrap(wrapping, key_type, blob, staged)
    except p11.PKCS11Error:
        raise InvalidRequest("the encrypted key material does not unwrap with these import parameters") from None
    try:
        if _measured_length(session, obj) != length:
            raise InvalidRequest(f"the key material must be {length} bytes")
        return obj.copy({Attribute.TOKEN: True, Attribute.EXTRACTABLE: False, Attribute.LABEL: label})
    finally:
        with contextlib.suppress(p11.PKCS11Error):
            obj.destroy()


def _measured_length(session: Any, obj: Any) -> int:
    probe = session.generate_key(
        KeyType.AES,
        256,
        store=False,
        template={Attribute.WRAP: True, Attribute.ENCRYPT: False, Attribute.DECRYPT: False},
    )
    try:
        return len(probe.wrap_key(obj, mechanism=Mechanism.AES_KEY_WRAP)) - 8
    except p11.PKCS11Error:
        return -1  # not a multiple of 8 bytes
    finally:
        with contextlib.suppress(p11.PKCS11Error):
            probe.destroy()


def _rsa_unwrap(wrapping: Any, key_type: KeyType, blob: bytes, template: dict[Attribute, Any]) -> Any:
    return wrapping.unwrap_key(
        ObjectClass.SECRET_KEY,
        key_type,
        blob,
        mechanism=Mechanism.RSA_PKCS_OAEP,
        mechanism_param=_OAEP_SHA1,
        template=template,
    )


def _rsa_aes_unwrap(wrapping: Any, key_type: KeyType, blob: bytes, template: dict[Attribute, Any]) -> Any:
    size = RSA_BITS // 8
    if len(blob) <= size:
        raise p11.WrappedKeyLenRange()
    ephemeral = wrapping.unwrap_key(
        ObjectClass.SECRET_KEY,
        KeyType.AES,
        blob[:size],
        mechanism=Mechanism.RSA_PKCS_OAEP,
        mechanism_param=_OAEP_SHA1,
        template={
            Attribute.TOKEN: False,
            Attribute.UNWRAP: True,
            Attribute.SENSITIVE: True,
            Attribute.EXTRACTABLE: False,
        },
    )
    try:
        return ephemeral.unwrap_key(
            ObjectClass.SECRET_KEY, key_type, blob[size:], mechanism=Mechanism.AES_KEY_WRAP_PAD, template=template
        )
    finally:
        with contextlib.suppress(p11.PKCS11Error):
            ephemeral.destroy()


def _spki(modulus: bytes, exponent: bytes) -> bytes:
    """DER SubjectPublicKeyInfo of an RSA public key (rsaEncryption, NULL parameters)."""
    rsa_public_key = _der(0x30, _der_int(modulus) + _der_int(exponent))
    algorithm = _der(0x30, bytes.fromhex("06092a864886f70d010101") + bytes.fromhex("0500"))
    return _der(0x30, algorithm + _der(0x03, b"\x00" + rsa_public_key))


def _der_int(value: bytes) -> bytes:
    value = value.lstrip(b"\x00") or b"\x00"
    return _der(0x02, b"\x00" + value if value[0] & 0x80 else value)


def _der(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + body
