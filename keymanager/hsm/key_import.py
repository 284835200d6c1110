"""Bring your own key: key material unwrapped inside the HSM, under import parameters
(:mod:`keymanager.hsm.import_parameters`: RSA wrapping key pairs made in the HSM). Shaped like AWS KMS's import.

``unwrap_version`` unwraps (``C_UnwrapKey``) straight into token objects with the key version's
final template and label, so the material never exists in clear in this process and no
extractable object is made. Each object is then checked inside the HSM, and destroyed (the
import refused, the key unchanged) unless all hold:

* its length, read from the object (``CKA_VALUE_LEN``), is exactly the algorithm's (32 bytes for
  AES-256, the digest's length for HMAC keys): else 400 naming the expected length;
* its attributes read back as the template asked (:mod:`keymanager.hsm.readback`; a token that
  leaves ``CKA_SENSITIVE`` false or ``CKA_EXTRACTABLE`` true on an unwrapped key has them set,
  which PKCS#11 allows in that direction only, and read again);
* it works: a known-answer operation of the algorithm's own mechanism runs in the HSM (encrypt
  and decrypt back, or sign and verify), whose output is the object's key check value;
* on a key that has material already, the check value equals the current primary version's
  (the same material: nothing is made) unless the import is of ``NEW_KEY_MATERIAL``, which must
  differ. The check values are compared in this process; the material never is.

The wrapping key is destroyed (one use) once an import succeeded. Every PKCS#11 call runs on the
HSM thread through :meth:`Hsm.call`.
"""

from __future__ import annotations

import contextlib
import enum
import hmac
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pkcs11
from pkcs11 import MGF, Attribute, KeyType, Mechanism, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain.key_specs import BlockMode, spec_of
from keymanager.domain.models import HMAC_KEY_BITS, Algorithm, HsmObjects
from keymanager.errors import InvalidRequest
from keymanager.hsm.adapter import Hsm
from keymanager.hsm.capabilities import hmac_mechanism
from keymanager.hsm.import_parameters import RSA_BITS, WrappingAlgorithm, parse_token, wrapping_key_label
from keymanager.hsm.readback import check_object, tighten
from keymanager.hsm.templates import (
    HMAC_TEMPLATE,
    NO_CAPABILITIES,
    template_of,
    version_labels,
)
from keymanager.hsm.token import LOST

_OAEP_SHA1 = (Mechanism.SHA_1, MGF.SHA1, None)
_ZERO_BLOCK = bytes(16)
_CHECK_MESSAGE = b"keymanager key check value"


class ImportType(enum.StrEnum):
    """AWS's ``ImportType``: the key's own material again, or new material (a new version)."""

    EXISTING_KEY_MATERIAL = "EXISTING_KEY_MATERIAL"
    NEW_KEY_MATERIAL = "NEW_KEY_MATERIAL"


@dataclass(frozen=True)
class EncryptedKeyMaterial:
    """Key material as an import brings it: ``parts`` (one per object of the key version), each wrapped
    under the import parameters ``import_token`` names, and whether it is the key's own material again
    or new material (``import_type``)."""

    import_token: str
    parts: Sequence[bytes]
    import_type: ImportType = ImportType.EXISTING_KEY_MATERIAL


def unwrap_version(
    hsm: Hsm,
    key_id: str,
    number: int,
    algorithm: Algorithm,
    material: EncryptedKeyMaterial,
    *,
    current: HsmObjects | None = None,
    now: float | None = None,
) -> HsmObjects | None:
    """Unwrap ``material`` (one part per object of ``algorithm``'s version) into version ``number``'s
    objects, checked as the module docstring says; None when ``current`` (the key's primary version)
    holds the same material and its import type is ``EXISTING_KEY_MATERIAL`` (nothing is made).

    Raises InvalidRequest for a malformed, unknown or expired token, material of the wrong length,
    that does not unwrap or does not work, other material than ``current``'s (or the same, for new
    material); TemplateNotHonoured when the HSM made the object other than asked. Nothing is left in
    the token then, and the import token stays usable. On success the wrapping key is gone.
    """
    wrapping = parse_token(material.import_token)
    if wrapping[1] <= (now if now is not None else time.time()):
        raise InvalidRequest("the import parameters have expired: ask for new ones")
    objects = version_labels(key_id, number, algorithm, secrets.token_hex(4))
    targets = _targets(algorithm, objects)
    if len(material.parts) != len(targets):
        raise InvalidRequest(f"{algorithm.value} takes {len(targets)} encrypted key material part(s)")
    compared = None if current is None else _targets(algorithm, current)
    parts = list(zip(targets, material.parts, strict=True))
    label = wrapping_key_label(key_id, material.import_token)
    made = hsm.call(_unwrap_all, label, wrapping[0], parts, compared, material.import_type)
    return objects if made else None


@dataclass(frozen=True)
class _Target:
    """One object of a version: its label, key type, template, exact length in bytes, and the algorithm
    (with its mechanism) its known-answer check runs."""

    label: str
    key_type: KeyType
    template: dict[Attribute, Any]
    length: int
    algorithm: Algorithm
    what: str


def _targets(algorithm: Algorithm, objects: HsmObjects) -> list[_Target]:
    out: list[_Target] = []
    if objects.enc_label is not None:
        aes = template_of(algorithm)
        size = spec_of(algorithm).key_bytes
        out.append(_Target(objects.enc_label, KeyType.AES, aes, size, algorithm, f"an AES-{size * 8} key"))
    if objects.mac_label is not None:
        mac = algorithm if algorithm in HMAC_KEY_BITS else Algorithm.HMAC_SHA256
        size = HMAC_KEY_BITS[mac] // 8
        out.append(_Target(objects.mac_label, KeyType.GENERIC_SECRET, HMAC_TEMPLATE, size, mac, f"a {mac.value} key"))
    return out


# -- work done on the HSM thread ------------------------------------------------------


def _unwrap_all(
    token: Any,
    label: str,
    algorithm: WrappingAlgorithm,
    parts: list[tuple[_Target, bytes]],
    current: list[_Target] | None,
    import_type: ImportType,
) -> bool:
    """Unwrap and check every part; whether the objects were kept (False: the same material as ``current``)."""
    session = token.session()
    found = list(session.get_objects({Attribute.CLASS: ObjectClass.PRIVATE_KEY, Attribute.LABEL: label}))
    if len(found) != 1:
        raise InvalidRequest("import_token is unknown, used already, or for another key")
    wrapping, made = found[0], []
    try:
        for target, blob in parts:
            made.append(_unwrap_one(token, wrapping, algorithm, target, blob))
        kept = _compare(token, made, [target for target, _ in parts], current, import_type)
    except BaseException:
        _destroy(made)
        raise
    if not kept:
        _destroy(made)
    with contextlib.suppress(p11.PKCS11Error):
        wrapping.destroy()
    return kept


def _compare(
    token: Any, made: list[Any], targets: list[_Target], current: list[_Target] | None, import_type: ImportType
) -> bool:
    """Check each new object works; whether to keep them, compared with the key's ``current`` objects."""
    values = [_check_value(obj, target) for obj, target in zip(made, targets, strict=True)]
    if current is None:
        return True
    existing = [_check_value(token.key(target.label), target) for target in current]
    same = all(hmac.compare_digest(a, b) for a, b in zip(values, existing, strict=True))
    if import_type is ImportType.NEW_KEY_MATERIAL:
        if same:
            raise InvalidRequest("NEW_KEY_MATERIAL must differ from the key's current material")
        return True
    if not same:
        raise InvalidRequest(
            "the key material differs from this key's: a re-import takes the same material only "
            "(new material: import_type NEW_KEY_MATERIAL)"
        )
    return False


def _destroy(objects: list[Any]) -> None:
    for obj in objects:
        with contextlib.suppress(p11.PKCS11Error):
            obj.destroy()


def _unwrap_one(token: Any, wrapping: Any, algorithm: WrappingAlgorithm, target: _Target, blob: bytes) -> Any:
    """Unwrap ``blob`` straight into the token object ``target`` and check its length and attributes."""
    template = {**target.template, Attribute.LABEL: target.label}
    try:
        if algorithm is WrappingAlgorithm.RSAES_OAEP_SHA_1:
            obj = _rsa_unwrap(wrapping, target.key_type, blob, template)
        else:
            obj = _rsa_aes_unwrap(wrapping, target.key_type, blob, template)
    except LOST:
        raise
    except p11.PKCS11Error:  # some tokens refuse a key of the wrong length here already
        raise InvalidRequest(
            f"the encrypted key material does not unwrap with these import parameters as {target.what} "
            f"of exactly {target.length} bytes"
        ) from None
    try:
        length = _length(token, wrapping, algorithm, target, blob, obj)
        if length != target.length:
            raise InvalidRequest(f"the key material of {target.what} must be exactly {target.length} bytes")
        tighten(obj)
    except BaseException:
        _destroy([obj])
        raise
    check_object(obj, target.template, target.length if token.quirks.reports_unwrapped_length else None)
    return obj


def _length(token: Any, wrapping: Any, algorithm: WrappingAlgorithm, target: _Target, blob: bytes, obj: Any) -> int:
    """The unwrapped key's length in bytes, read from the object (``CKA_VALUE_LEN``), or -1 when it cannot
    be ``target``'s.

    SoftHSM leaves it at 0 (see :mod:`keymanager.hsm.quirks`); there the blob is unwrapped once more
    into a session object that can do nothing but be wrapped, measured by wrapping it under a
    throwaway AES key made in the HSM, and destroyed. SoftHSM pads RFC 3394 input to 8 bytes, so
    that measure is the length rounded up to 8 bytes: exact with the known-answer check for AES keys
    (which work only at 16, 24 or 32 bytes); for HMAC keys it leaves the last 8 bytes' bucket, and
    an HMAC key up to 7 bytes short is the same HMAC key with zero bytes appended.
    """
    if token.quirks.reports_unwrapped_length:
        return int(obj[Attribute.VALUE_LEN])
    measured = {**NO_CAPABILITIES, Attribute.TOKEN: False, Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: True}
    if algorithm is WrappingAlgorithm.RSAES_OAEP_SHA_1:
        staged = _rsa_unwrap(wrapping, target.key_type, blob, measured)
    else:
        staged = _rsa_aes_unwrap(wrapping, target.key_type, blob, measured)
    probe = token.session().generate_key(
        KeyType.AES, 256, store=False, template={**NO_CAPABILITIES, Attribute.TOKEN: False, Attribute.WRAP: True}
    )
    try:
        padded = len(probe.wrap_key(staged, mechanism=Mechanism.AES_KEY_WRAP)) - 8
    except p11.PKCS11Error:
        return -1
    finally:
        _destroy([probe, staged])
    return target.length if padded == -(-target.length // 8) * 8 else padded


def _check_value(key: Any, target: _Target) -> bytes:
    """The key check value of ``key``: a known-answer operation of ``target``'s algorithm in the HSM (fixed
    input; encrypted data decrypted back, a MAC verified). InvalidRequest when the key does not work."""
    try:
        if target.key_type is KeyType.GENERIC_SECRET:
            mechanism = hmac_mechanism(target.algorithm)
            mac = bytes(key.sign(_CHECK_MESSAGE, mechanism=mechanism))
            if not key.verify(_CHECK_MESSAGE, mac, mechanism=mechanism):
                raise p11.SignatureInvalid()
            return mac
        if not target.template.get(Attribute.DECRYPT):  # encrypt only (FF1's): AES of the zero block
            return bytes(key.encrypt(_ZERO_BLOCK, mechanism=Mechanism.AES_CBC, mechanism_param=_ZERO_BLOCK))
        if spec_of(target.algorithm).mode is BlockMode.GCM:
            params = pkcs11.GCMParams(bytes(12), b"", 128)
            sealed = bytes(key.encrypt(_ZERO_BLOCK, mechanism=Mechanism.AES_GCM, mechanism_param=params))
            opened = key.decrypt(sealed, mechanism=Mechanism.AES_GCM, mechanism_param=params)
        else:
            sealed = bytes(key.encrypt(_ZERO_BLOCK, mechanism=Mechanism.AES_CBC_PAD, mechanism_param=_ZERO_BLOCK))
            opened = key.decrypt(sealed, mechanism=Mechanism.AES_CBC_PAD, mechanism_param=_ZERO_BLOCK)
        if bytes(opened) != _ZERO_BLOCK:
            raise p11.EncryptedDataInvalid()
        return sealed
    except LOST:
        raise
    except p11.PKCS11Error:
        raise InvalidRequest(
            f"the imported key material does not work as {target.what} in the HSM: it must be exactly "
            f"{target.length} bytes"
        ) from None


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
            **NO_CAPABILITIES,
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
