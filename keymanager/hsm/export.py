"""Key material in and out of the HSM for KMIP: exportable key versions (generated extractable but
sensitive, handed out wrapped) and registered AES keys (unwrapped into the HSM).

A key created exportable (``docs/kmip.md``: an admin's choice, for KMIP clients that fetch key
material) has one AES object (of the AES-GCM spec it was created as) labelled ``…/xaes``
(:data:`~keymanager.hsm.token.EXPORTABLE_SUFFIX`), made with
:data:`~keymanager.hsm.templates.EXPORTABLE_AES_TEMPLATE` and read back against it. Its
material never leaves in clear from the token: :func:`export` wraps it (CKM_AES_KEY_WRAP, RFC 3394)
under a fresh session key made for the purpose from random bytes, which is destroyed at once, and
unwraps the result in memory for the caller. Every other key stays non-extractable.
"""

from __future__ import annotations

import contextlib
import secrets

from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap
from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain.key_specs import SPECS, BlockMode, spec_of
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.hsm.readback import check_object, tighten
from keymanager.hsm.templates import AES_TEMPLATE, EXPORTABLE_AES_TEMPLATE, version_labels
from keymanager.hsm.token import EXPORTABLE_SUFFIX, Token

KEY_BYTES = 32
"""The one-time wrapping keys' length."""
AES_KEY_BYTES = frozenset(spec.key_bytes for spec in SPECS.values() if spec.mode is BlockMode.GCM)
"""The lengths of the AES-GCM specs' keys (what an exportable or registered key may be)."""


def exportable_labels(key_id: str, version: int) -> HsmObjects:
    """The labels of an exportable key version (one AES object; unique per generation)."""
    return HsmObjects(enc_label=f"km/{key_id}/v{version}.{secrets.token_hex(4)}{EXPORTABLE_SUFFIX}", mac_label=None)


def generate(token: Token, key_id: str, version: int, algorithm: Algorithm) -> HsmObjects:
    """A new exportable key version of the AES-GCM spec ``algorithm``, read back against its template
    (TemplateNotHonoured otherwise)."""
    token.capabilities.require(algorithm.value)
    size = spec_of(algorithm).key_bytes
    objects = exportable_labels(key_id, version)
    aes = token.session().generate_key(
        KeyType.AES,
        size * 8,
        label=objects.enc_label,
        store=True,
        mechanism=Mechanism.AES_KEY_GEN,
        template=EXPORTABLE_AES_TEMPLATE,
    )
    check_object(aes, EXPORTABLE_AES_TEMPLATE, size)
    return objects


def export(token: Token, label: str) -> bytes:
    """The material of the exportable AES object ``label``, wrapped in the HSM under a one-time key and
    unwrapped here; InvalidRequest-free: a label that is not exportable never reaches this (its caller checks)."""
    if not label.endswith(EXPORTABLE_SUFFIX):
        raise ValueError("only an exportable key version's material is exported")
    target = token.key(label)
    one_time = secrets.token_bytes(KEY_BYTES)
    wrapper = token.session().create_object(
        {
            Attribute.CLASS: ObjectClass.SECRET_KEY,
            Attribute.KEY_TYPE: KeyType.AES,
            Attribute.VALUE: one_time,
            Attribute.TOKEN: False,
            Attribute.PRIVATE: True,
            Attribute.SENSITIVE: True,
            Attribute.EXTRACTABLE: False,
            Attribute.WRAP: True,
            Attribute.UNWRAP: False,
            Attribute.ENCRYPT: False,
            Attribute.DECRYPT: False,
        }
    )
    try:
        wrapped = bytes(wrapper.wrap_key(target, mechanism=Mechanism.AES_KEY_WRAP))
    finally:
        with contextlib.suppress(p11.PKCS11Error):
            wrapper.destroy()
    return aes_key_unwrap(one_time, wrapped)


def import_aes(token: Token, key_id: str, version: int, material: bytes, exportable: bool = False) -> HsmObjects:
    """A key version of AES ``material`` a client gave (KMIP's Register; 16, 24 or 32 bytes, the
    AES-GCM specs' lengths), unwrapped into the HSM: wrapped here under a one-time key made in the HSM
    for the purpose (destroyed at once), unwrapped there into a token object of the AES template
    (non-extractable, sensitive; ``exportable``: the exportable template, for a key-store client's
    Register), read back against it."""
    if len(material) not in AES_KEY_BYTES:
        raise ValueError("an AES key is 16, 24 or 32 bytes")
    template = EXPORTABLE_AES_TEMPLATE if exportable else AES_TEMPLATE
    if exportable:
        objects = exportable_labels(key_id, version)
    else:
        objects = version_labels(key_id, version, Algorithm.AES_256_GCM, secrets.token_hex(4))
    one_time = secrets.token_bytes(KEY_BYTES)
    wrapper = token.session().create_object(
        {
            Attribute.CLASS: ObjectClass.SECRET_KEY,
            Attribute.KEY_TYPE: KeyType.AES,
            Attribute.VALUE: one_time,
            Attribute.TOKEN: False,
            Attribute.SENSITIVE: True,
            Attribute.EXTRACTABLE: False,
            Attribute.UNWRAP: True,
            Attribute.WRAP: False,
            Attribute.ENCRYPT: False,
            Attribute.DECRYPT: False,
        }
    )
    try:
        made = wrapper.unwrap_key(
            ObjectClass.SECRET_KEY,
            KeyType.AES,
            aes_key_wrap(one_time, bytes(material)),
            label=objects.enc_label,
            store=True,
            mechanism=Mechanism.AES_KEY_WRAP,
            template=template,
        )
    finally:
        with contextlib.suppress(p11.PKCS11Error):
            wrapper.destroy()
    if not exportable:
        tighten(made)
    check_object(made, template, len(material) if token.quirks.reports_unwrapped_length else None)
    return objects
