"""What the service's token objects look like: their labels and the templates they are made with.

python-pkcs11's ``defaults.py`` is not trusted: every attribute that matters is spelled out here.
"""

from __future__ import annotations

from typing import Any

from pkcs11 import Attribute, ObjectClass

from keymanager.domain.key_specs import HsmObject, KeyUsage, ObjectRole, implied_usage, spec_of
from keymanager.domain.models import Algorithm, HsmObjects

NO_CAPABILITIES: dict[Attribute, Any] = {
    Attribute.ENCRYPT: False,
    Attribute.DECRYPT: False,
    Attribute.SIGN: False,
    Attribute.VERIFY: False,
    Attribute.WRAP: False,
    Attribute.UNWRAP: False,
    Attribute.DERIVE: False,
}
"""Every capability flag off: a template grants only what it sets on top of this."""
_SECRET_KEY_BASE: dict[Attribute, Any] = {
    Attribute.CLASS: ObjectClass.SECRET_KEY,
    Attribute.TOKEN: True,
    Attribute.PRIVATE: True,
    Attribute.SENSITIVE: True,
    Attribute.EXTRACTABLE: False,
    **NO_CAPABILITIES,
}
RSA_UNWRAP_PRIVATE_TEMPLATE: dict[Attribute, Any] = {
    Attribute.TOKEN: True,
    Attribute.PRIVATE: True,
    Attribute.SENSITIVE: True,
    Attribute.EXTRACTABLE: False,
    Attribute.UNWRAP: True,
    Attribute.DECRYPT: False,
    Attribute.SIGN: False,
    Attribute.DERIVE: False,
}
"""The private half of an import's wrapping key pair: it can only unwrap."""
RSA_UNWRAP_PUBLIC_TEMPLATE: dict[Attribute, Any] = {
    Attribute.TOKEN: False,
    Attribute.ENCRYPT: False,
    Attribute.WRAP: False,
    Attribute.VERIFY: False,
}
"""Its public half: a session object, read out and destroyed (the client wraps in its own software)."""

PROBE_LABEL = "km-ready-probe"
"""The object the readiness probe makes and destroys (outside the ``km/`` namespace of key versions)."""


_ROLE_FIELDS = {
    ObjectRole.AES: "enc_label",
    ObjectRole.FF1: "enc_label",
    ObjectRole.HMAC: "mac_label",
    ObjectRole.PRIVATE: "private_label",
    ObjectRole.PUBLIC: "public_label",
}
"""Which field of :class:`HsmObjects` holds the label of an object of each role."""


def version_labels(
    key_id: str, version: int, algorithm: Algorithm, nonce: str = "", usage: KeyUsage | None = None
) -> HsmObjects:
    """The labels of the HSM objects of one key version: one per object the table of key types gives
    the spec (and ``usage``; None: the spec's default), ``km/<key id>/v<n>/<role>``.

    ``nonce`` makes the labels of one generation unique, so that when two processes race
    to make the same version, the loser can destroy its own objects and nobody else's.
    """
    base = f"km/{key_id}/v{version}" + (f".{nonce}" if nonce else "")
    labels = {_ROLE_FIELDS[obj.role]: f"{base}/{obj.role.value}" for obj in _objects(algorithm, usage)}
    return HsmObjects(
        enc_label=labels.get("enc_label"),
        mac_label=labels.get("mac_label"),
        private_label=labels.get("private_label"),
        public_label=labels.get("public_label"),
    )


def _objects(algorithm: Algorithm, usage: KeyUsage | None) -> tuple[HsmObject, ...]:
    spec = spec_of(algorithm)
    return spec.usage(usage or implied_usage(algorithm)).objects


_CLASSES = {
    "SECRET_KEY": ObjectClass.SECRET_KEY,
    "PRIVATE_KEY": ObjectClass.PRIVATE_KEY,
    "PUBLIC_KEY": ObjectClass.PUBLIC_KEY,
}
_PRIVATE_KEY_BASE: dict[Attribute, Any] = {
    Attribute.TOKEN: True,
    Attribute.PRIVATE: True,
    Attribute.SENSITIVE: True,
    Attribute.EXTRACTABLE: False,
    Attribute.DECRYPT: False,
    Attribute.SIGN: False,
    Attribute.UNWRAP: False,
    Attribute.DERIVE: False,
}
"""A private key object: every capability a private key can have off (PKCS#11 refuses the others in
its template), the usage's set on top."""
_PUBLIC_KEY_BASE: dict[Attribute, Any] = {
    Attribute.TOKEN: True,
    Attribute.PRIVATE: False,
    Attribute.ENCRYPT: False,
    Attribute.VERIFY: False,
    Attribute.WRAP: False,
    Attribute.DERIVE: False,
}
"""A public key object: a token object anyone logged in may read, only the capabilities the usage gives."""
_BASES = {"SECRET_KEY": _SECRET_KEY_BASE, "PRIVATE_KEY": _PRIVATE_KEY_BASE, "PUBLIC_KEY": _PUBLIC_KEY_BASE}


def object_template(obj: HsmObject) -> dict[Attribute, Any]:
    """The template of one HSM object of the table: its class's base, plus only its capabilities."""
    return {**_BASES[obj.object_class], **{Attribute[c.value]: True for c in obj.capabilities}}


def object_class(obj: HsmObject) -> ObjectClass:
    return _CLASSES[obj.object_class]


def role_template(algorithm: Algorithm, role: ObjectRole, usage: KeyUsage | None = None) -> dict[Attribute, Any]:
    """The template of the ``role`` object of a key version of ``algorithm`` (and ``usage``)."""
    return object_template(next(o for o in _objects(algorithm, usage) if o.role is role))


def template_of(algorithm: Algorithm) -> dict[Attribute, Any]:
    """The template of a key version's AES or FF1 object under ``algorithm`` (its secret key that encrypts)."""
    secret = next(o for o in _objects(algorithm, None) if o.role in (ObjectRole.AES, ObjectRole.FF1))
    return object_template(secret)


AES_TEMPLATE = role_template(Algorithm.AES_256_GCM, ObjectRole.AES)
"""An AES-256 key version: encrypt and decrypt, nothing else (the table's AES object)."""
HMAC_TEMPLATE = role_template(Algorithm.HMAC_SHA256, ObjectRole.HMAC)
"""An HMAC key version (a generic secret): sign and verify, nothing else (the table's HMAC object)."""
AES_ENCRYPT_ONLY_TEMPLATE = role_template(Algorithm.FF1_AES_256, ObjectRole.FF1)
"""An FF1_AES_256 key version: FF1 needs only AES's forward cipher (see hsm/tokenization.py)."""
EXPORTABLE_AES_TEMPLATE = {**AES_TEMPLATE, Attribute.EXTRACTABLE: True}
"""An exportable AES-256 key version (``hsm/export.py``): sensitive (never read in clear), but it may be
wrapped, so its material can be handed out to the principals its policy names."""
