"""What the service's token objects look like: their labels and the templates they are made with.

python-pkcs11's ``defaults.py`` is not trusted: every attribute that matters is spelled out here.
"""

from __future__ import annotations

from typing import Any

from pkcs11 import Attribute, ObjectClass

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
AES_TEMPLATE = {**_SECRET_KEY_BASE, Attribute.ENCRYPT: True, Attribute.DECRYPT: True}
"""An AES-256 key version: encrypt and decrypt, nothing else."""
HMAC_TEMPLATE = {**_SECRET_KEY_BASE, Attribute.SIGN: True, Attribute.VERIFY: True}
"""An HMAC-SHA256 key version (a generic secret): sign and verify, nothing else."""
EXPORTABLE_AES_TEMPLATE = {**AES_TEMPLATE, Attribute.EXTRACTABLE: True}
"""An exportable AES-256 key version (``hsm/export.py``): sensitive (never read in clear), but it may be
wrapped, so its material can be handed out to the principals its policy names."""
AES_ENCRYPT_ONLY_TEMPLATE = {**_SECRET_KEY_BASE, Attribute.ENCRYPT: True}
"""An FF1_AES_256 key version: FF1 needs only AES's forward cipher (see hsm/tokenization.py)."""

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


def version_labels(key_id: str, version: int, algorithm: Algorithm, nonce: str = "") -> HsmObjects:
    """The labels of the HSM objects of one key version.

    ``nonce`` makes the labels of one generation unique, so that when two processes race
    to make the same version, the loser can destroy its own objects and nobody else's.
    """
    base = f"km/{key_id}/v{version}" + (f".{nonce}" if nonce else "")
    if algorithm is Algorithm.AES_256_CBC_HMAC_SHA256:
        return HsmObjects(enc_label=f"{base}/aes", mac_label=f"{base}/hmac")
    if algorithm is Algorithm.AES_256_GCM:
        return HsmObjects(enc_label=f"{base}/aes", mac_label=None)
    if algorithm is Algorithm.FF1_AES_256:
        return HsmObjects(enc_label=f"{base}/ff1", mac_label=None)
    return HsmObjects(enc_label=None, mac_label=f"{base}/hmac")


def template_of(algorithm: Algorithm) -> dict[Attribute, Any]:
    """The template of a key version's AES object under ``algorithm``."""
    return AES_ENCRYPT_ONLY_TEMPLATE if algorithm is Algorithm.FF1_AES_256 else AES_TEMPLATE
