"""The work each HSM operation does, run on the HSM thread with the thread's :class:`Token`.

Every function takes the token first and is called only through :meth:`Dispatcher.call
<keymanager.hsm.dispatch.Dispatcher.call>`, which maps PKCS#11 errors to the service's errors.

A missing object answers the same on every operation. A key version whose object is not in the
token (destroyed behind the database's back, or a token that is not ours) is a fault of the
server, not of the caller's input: encrypt, decrypt (single and batch), data keys and MACs all
raise :class:`MissingKeyObject`, answered as KeyMaterialMissing (503 ``hsm_unavailable``). This
never tells a caller anything about a ciphertext: the HSM is asked only for a version the
database has, so a ciphertext naming a key or version the database does not have still fails
before it, with the DecryptionFailed that every other decryption failure raises.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import pkcs11
from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain import ciphertext as ct
from keymanager.domain.key_specs import BlockMode, spec_of
from keymanager.domain.models import HMAC_KEY_BITS, Algorithm, HsmObjects
from keymanager.errors import DecryptionFailed
from keymanager.hsm.capabilities import Capabilities, hmac_mechanism
from keymanager.hsm.readback import check_object
from keymanager.hsm.templates import AES_TEMPLATE, HMAC_TEMPLATE, PROBE_LABEL, template_of, version_labels
from keymanager.hsm.token import LOST, Token

IvSource = Callable[[int], bytes]
"""Gives ``n`` bytes for an IV or a nonce: ``secrets.token_bytes`` except in known-answer tests."""


def ping(token: Token) -> None:
    session = token.session()
    session.generate_random(64)
    # A search reaches the token's object store, not only its random generator.
    list(session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.LABEL: "km/ping"}))
    # Asking for the token again (C_GetSlotList, C_GetTokenInfo) reaches its storage: SoftHSM answers
    # GeneralError here when the token directory is gone, while the session above still works from memory.
    token.present()


def probe(token: Token) -> None:
    ping(token)
    session = token.session()
    session.generate_key(
        KeyType.AES, 128, label=PROBE_LABEL, store=True, mechanism=Mechanism.AES_KEY_GEN, template=AES_TEMPLATE
    )
    _destroy_label(token, PROBE_LABEL)  # also any probe object a failed probe left behind


def random(token: Token, nbytes: int) -> bytes:
    return bytes(token.session().generate_random(nbytes * 8))


def data_key(
    token: Token, objects: HsmObjects, algorithm: Algorithm, head: bytes, nbytes: int, context: bytes
) -> tuple[bytes, bytes]:
    plaintext = random(token, nbytes)
    return plaintext, encrypt(token, objects, algorithm, head, plaintext, context)


def require(token: Token, feature: str) -> None:
    token.capabilities.require(feature)


def capabilities(token: Token) -> Capabilities:
    return token.capabilities


def generate_version(token: Token, key_id: str, version: int, algorithm: Algorithm) -> HsmObjects:
    """The objects of a new key version, each read back (TemplateNotHonoured, nothing left, when the HSM
    did not honour its template); InvalidRequest naming the mechanism the HSM lacks for ``algorithm``."""
    token.capabilities.require(algorithm.value)
    session = token.session()
    objects = version_labels(key_id, version, algorithm, secrets.token_hex(4))
    created: list[Any] = []
    try:
        if objects.enc_label is not None:
            size = spec_of(algorithm).key_bytes
            aes = session.generate_key(
                KeyType.AES,
                size * 8,
                label=objects.enc_label,
                store=True,
                mechanism=Mechanism.AES_KEY_GEN,
                template=template_of(algorithm),
            )
            created.append(aes)
            check_object(aes, template_of(algorithm), size)
        if objects.mac_label is not None:
            bits = HMAC_KEY_BITS.get(algorithm, 256)
            secret = session.generate_key(
                KeyType.GENERIC_SECRET,
                bits,
                label=objects.mac_label,
                store=True,
                mechanism=Mechanism.GENERIC_SECRET_KEY_GEN,
                template=HMAC_TEMPLATE,
            )
            created.append(secret)
            check_object(secret, HMAC_TEMPLATE, bits // 8)
    except BaseException:
        for obj in created:
            with contextlib.suppress(p11.PKCS11Error):
                obj.destroy()
        raise
    return objects


def destroy_version(token: Token, objects: HsmObjects) -> None:
    for label in objects.labels():
        destroy_label(token, label)


def destroy_label(token: Token, label: str) -> None:
    token.forget(label)
    _destroy_label(token, label)


def _destroy_label(token: Token, label: str, attempts: int = 5) -> None:
    """Destroy every key object (secret, private or public) labelled ``label``; idempotent, also against
    another process doing it too."""
    session = token.session()
    templates = [{Attribute.CLASS: object_class, Attribute.LABEL: label} for object_class in KEY_CLASSES]
    for _ in range(attempts):
        try:
            found = [obj for template in templates for obj in session.get_objects(template)]
            if not found:
                return
            for obj in found:
                obj.destroy()
        except token.quirks.destroyed_elsewhere:
            continue  # look again: it is gone, or it is still there and we try once more
    raise p11.FunctionFailed()


KEY_CLASSES = (ObjectClass.SECRET_KEY, ObjectClass.PRIVATE_KEY, ObjectClass.PUBLIC_KEY)
"""The classes of the objects the service makes: sweeps, inventories and destruction cover all three."""


def find_labels(token: Token, prefix: str) -> list[str]:
    """The labels starting with ``prefix`` of the token's key objects (secret, private and public), once each."""
    session = token.session()
    labels = set()
    for object_class in KEY_CLASSES:
        for obj in session.get_objects({Attribute.CLASS: object_class, Attribute.TOKEN: True}):
            label = obj[Attribute.LABEL]
            if label.startswith(prefix):
                labels.add(label)
    return sorted(labels)


def find_labels_afresh(token: Token, prefix: str) -> list[str]:
    token.quirks.refresh_view(token)
    return find_labels(token, prefix)


def identity(token: Token) -> tuple[str, str, str]:
    """The token's manufacturer, model and serial number (``C_GetTokenInfo``), trimmed."""
    found = token.session().token
    serial = found.serial.decode("ascii", "replace") if isinstance(found.serial, bytes) else str(found.serial)
    return str(found.manufacturer_id).strip(), str(found.model).strip(), serial.strip()


def mac(token: Token, objects: HsmObjects, message: bytes, algorithm: Algorithm = Algorithm.HMAC_SHA256) -> bytes:
    key = token.key(_require(objects.mac_label))
    return bytes(key.sign(bytes(message), mechanism=hmac_mechanism(algorithm)))


def encrypt_many(
    token: Token, objects: HsmObjects, algorithm: Algorithm, head: bytes, items: Sequence[tuple[bytes, bytes]]
) -> list[bytes]:
    return [encrypt(token, objects, algorithm, head, plaintext, context) for plaintext, context in items]


def decrypt_many(
    token: Token, algorithm: Algorithm, items: Sequence[tuple[HsmObjects, bytes, bytes, bytes]]
) -> list[bytes | DecryptionFailed]:
    results: list[bytes | DecryptionFailed] = []
    for objects, head, body, context in items:
        try:
            results.append(decrypt(token, objects, algorithm, head, body, context))
        except DecryptionFailed as exc:
            results.append(exc)
    return results


def _require(label: str | None) -> str:
    if label is None:
        raise DecryptionFailed()
    return label


def encrypt(
    token: Token,
    objects: HsmObjects,
    algorithm: Algorithm,
    head: bytes,
    plaintext: bytes,
    context: bytes,
    iv_source: IvSource = secrets.token_bytes,
) -> bytes:
    """The ciphertext body of ``plaintext`` (:mod:`keymanager.domain.ciphertext`), its IV or nonce
    from ``iv_source``."""
    aes = token.key(_require(objects.enc_label))
    if spec_of(algorithm).mode is BlockMode.GCM:
        nonce = _exactly(iv_source(ct.NONCE_BYTES), ct.NONCE_BYTES)
        params = pkcs11.GCMParams(nonce, ct.gcm_aad(head, context), ct.TAG_BYTES * 8)
        return nonce + bytes(aes.encrypt(bytes(plaintext), mechanism=Mechanism.AES_GCM, mechanism_param=params))
    iv = _exactly(iv_source(ct.IV_BYTES), ct.IV_BYTES)
    body = _cbc_pad(aes.encrypt, bytes(plaintext), iv)
    mac = _hmac(token.key(_require(objects.mac_label)), ct.mac_parts(head, iv, body, context))
    return iv + body + mac


def _exactly(value: bytes, size: int) -> bytes:
    if len(value) != size:
        raise ValueError(f"the IV source gave {len(value)} bytes, not {size}")
    return bytes(value)


def decrypt(token: Token, objects: HsmObjects, algorithm: Algorithm, head: bytes, body: bytes, context: bytes) -> bytes:
    """The plaintext of a ciphertext body: DecryptionFailed for any failure of the ciphertext,
    MissingKeyObject (a server fault) when the version's objects are not in the token."""
    try:
        if spec_of(algorithm).mode is BlockMode.GCM:
            return _decrypt_gcm(token, objects, head, body, context)
        return _decrypt_cbc_hmac(token, objects, head, body, context)
    except LOST:
        raise
    except p11.PKCS11Error:
        # Bad tag (SoftHSM: GeneralError), bad padding, bad length: all look the same.
        raise DecryptionFailed() from None


def _decrypt_gcm(token: Token, objects: HsmObjects, head: bytes, body: bytes, context: bytes) -> bytes:
    aes = token.key(_require(objects.enc_label))  # before any check of the body: a missing key answers alike
    if len(body) < ct.NONCE_BYTES + ct.TAG_BYTES:
        raise DecryptionFailed()
    nonce, sealed = body[: ct.NONCE_BYTES], body[ct.NONCE_BYTES :]
    params = pkcs11.GCMParams(nonce, ct.gcm_aad(head, context), ct.TAG_BYTES * 8)
    return bytes(aes.decrypt(sealed, mechanism=Mechanism.AES_GCM, mechanism_param=params))


def _decrypt_cbc_hmac(token: Token, objects: HsmObjects, head: bytes, body: bytes, context: bytes) -> bytes:
    mac_key = token.key(_require(objects.mac_label))  # before any check of the body: a missing key answers alike
    aes = token.key(_require(objects.enc_label))
    size = len(body) - ct.IV_BYTES - ct.MAC_BYTES
    if size < 16 or size % 16:
        raise DecryptionFailed()
    iv, sealed, mac = body[: ct.IV_BYTES], body[ct.IV_BYTES : -ct.MAC_BYTES], body[-ct.MAC_BYTES :]
    expected = _hmac(mac_key, ct.mac_parts(head, iv, sealed, context))
    if not hmac.compare_digest(expected, mac):
        raise DecryptionFailed()
    return _cbc_pad(aes.decrypt, sealed, iv)


def _cbc_pad(crypt: Callable[..., Any], data: bytes, iv: bytes) -> bytes:
    """``crypt`` (a key's ``encrypt`` or ``decrypt``) of ``data`` with CBC-PAD, in one call. (Several
    parts are cheaper on SoftHSM for large segments, but python-pkcs11's multi-part signing crashed
    openCryptoki's soft token: one call works on both.)"""
    return bytes(crypt(data, mechanism=Mechanism.AES_CBC_PAD, mechanism_param=iv))


def _hmac(key: Any, parts: tuple[bytes, ...]) -> bytes:
    """HMAC-SHA256 with ``key`` of the concatenated ``parts``, in one call."""
    return bytes(key.sign(b"".join(parts), mechanism=Mechanism.SHA256_HMAC))
