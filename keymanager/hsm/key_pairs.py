"""Asymmetric key versions in the HSM: generation, signing, OAEP decryption, ECDH, public keys.

Run on the HSM thread with the thread's :class:`~keymanager.hsm.token.Token`, through the
:class:`~keymanager.hsm.dispatch.Dispatcher` (as :mod:`keymanager.hsm.operations`). The shapes come
from the table of key types (:mod:`keymanager.domain.key_specs`): key type, size or curve, the
objects of a version and the capabilities of each. Every private-key operation is the HSM's:

* signing takes a digest computed by the caller (there is no combined hash-and-sign mechanism for
  ECDSA; one path for every algorithm): ``CKM_RSA_PKCS_PSS`` with the algorithm's hash and MGF1 and
  a salt as long as the digest, ``CKM_RSA_PKCS`` over the DigestInfo (PKCS#1 v1.5 padding is the
  HSM's), ``CKM_ECDSA`` (raw ``r ‖ s``, DER-encoded here), ``CKM_EDDSA`` (pure, or with
  ``phFlag`` for Ed25519ph);
* decryption is ``CKM_RSA_PKCS_OAEP`` with the algorithm's hash: every failure is DecryptionFailed;
* ECDH is ``CKM_ECDH1_DERIVE`` (no KDF) into a session generic secret of the field's length,
  read and destroyed: the shared secret is the caller's, as AWS returns it.

A key pair is generated as two token objects, read back against their templates; when either is
not as asked, both are destroyed (nothing half made).
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

from pkcs11 import KDF, MGF, Attribute, KeyType, Mechanism, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain import public_keys
from keymanager.domain.key_specs import (
    OAEP_HASHES,
    SIGNING_HASHES,
    EncryptionAlgorithm,
    Hash,
    HsmKeyType,
    KeySpec,
    KeyUsage,
    ObjectRole,
    SigningAlgorithm,
    digest_bytes,
    spec_of,
)
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.errors import DecryptionFailed
from keymanager.hsm.capabilities import feature
from keymanager.hsm.mechanism_probes import ec_parameters
from keymanager.hsm.readback import check_object
from keymanager.hsm.templates import role_template, version_labels
from keymanager.hsm.token import LOST, MissingKeyObject, Token

_HASH_MECHANISMS = {
    Hash.SHA1: (Mechanism.SHA_1, MGF.SHA1),
    Hash.SHA256: (Mechanism.SHA256, MGF.SHA256),
    Hash.SHA384: (Mechanism.SHA384, MGF.SHA384),
    Hash.SHA512: (Mechanism.SHA512, MGF.SHA512),
}
_BORN_SENSITIVE = {Attribute.ALWAYS_SENSITIVE: True, Attribute.NEVER_EXTRACTABLE: True}
"""What a private key generated in the HSM reads back as besides its template: never out in clear."""
_KEY_TYPES = {HsmKeyType.RSA: KeyType.RSA, HsmKeyType.EC: KeyType.EC, HsmKeyType.EC_EDWARDS: KeyType.EC_EDWARDS}
_GENERATORS = {
    HsmKeyType.RSA: Mechanism.RSA_PKCS_KEY_PAIR_GEN,
    HsmKeyType.EC: Mechanism.EC_KEY_PAIR_GEN,
    HsmKeyType.EC_EDWARDS: Mechanism.EC_EDWARDS_KEY_PAIR_GEN,
}


def generate_key_pair(
    token: Token, key_id: str, version: int, algorithm: Algorithm, usage: KeyUsage
) -> tuple[HsmObjects, bytes]:
    """The objects of a new asymmetric key version and its DER SubjectPublicKeyInfo. Both halves are
    read back (TemplateNotHonoured, both destroyed, when the HSM did not honour a template);
    UnsupportedByHsm naming what the HSM lacks for the spec and usage."""
    token.capabilities.require(feature(algorithm, usage))
    spec = spec_of(algorithm)
    objects = version_labels(key_id, version, algorithm, secrets.token_hex(4), usage)
    public_template = {**role_template(algorithm, ObjectRole.PUBLIC, usage), Attribute.LABEL: objects.public_label}
    private_template = {**role_template(algorithm, ObjectRole.PRIVATE, usage), Attribute.LABEL: objects.private_label}
    if spec.key_type is HsmKeyType.RSA:
        public_template[Attribute.PUBLIC_EXPONENT] = b"\x01\x00\x01"
    else:
        assert spec.curve is not None
        public_template[Attribute.EC_PARAMS] = ec_parameters(spec.curve)
    public, private = token.session().generate_keypair(
        _KEY_TYPES[spec.key_type],
        spec.key_bits,
        mechanism=_GENERATORS[spec.key_type],
        store=True,
        public_template=public_template,
        private_template=private_template,
    )
    try:
        check_object(private, {**private_template, **_BORN_SENSITIVE})
        check_object(public, public_template)
        spki = _spki(spec, public)
    except BaseException:
        for obj in (private, public):
            with contextlib.suppress(p11.PKCS11Error):
                obj.destroy()
        raise
    return objects, spki


def _spki(spec: KeySpec, public: Any) -> bytes:
    """The DER SubjectPublicKeyInfo of a public key object (PKCS#11 gives RSA's modulus and exponent,
    and an EC point as a DER OCTET STRING)."""
    if spec.key_type is HsmKeyType.RSA:
        return public_keys.spki_from_rsa(bytes(public[Attribute.MODULUS]), bytes(public[Attribute.PUBLIC_EXPONENT]))
    encoded = bytes(public[Attribute.EC_POINT])
    return public_keys.spki_from_ec_point(spec, public_keys.unwrap_octet_string(encoded))


def sign(token: Token, objects: HsmObjects, algorithm: Algorithm, signing: SigningAlgorithm, signed: bytes) -> bytes:
    """The ``signing`` signature of ``signed`` (a digest, or the message for pure Ed25519) with the
    version's private key; UnsupportedByHsm when the HSM lacks what ``signing`` needs."""
    token.capabilities.require(feature(algorithm, KeyUsage.SIGN_VERIFY, signing))
    key = _private(token, objects)
    data, mechanism, param = _signing(spec_of(algorithm), signing, signed)
    signature = bytes(key.sign(data, mechanism=mechanism, mechanism_param=param))
    return public_keys.ecdsa_der(signature) if mechanism is Mechanism.ECDSA else signature


def verify(
    token: Token, objects: HsmObjects, algorithm: Algorithm, signing: SigningAlgorithm, signed: bytes, signature: bytes
) -> bool:
    """Whether ``signature`` is the ``signing`` signature of ``signed``, checked in the HSM with the
    version's public key: for the algorithms ``cryptography`` cannot verify (``key_specs.VERIFIED_IN_HSM``)."""
    token.capabilities.require(feature(algorithm, KeyUsage.SIGN_VERIFY, signing))
    spec = spec_of(algorithm)
    data, mechanism, param = _signing(spec, signing, signed)
    if mechanism is Mechanism.ECDSA:
        signature = public_keys.ecdsa_raw(signature, public_keys.curve(spec).key_size)
    try:
        return bool(_public(token, objects).verify(data, signature, mechanism=mechanism, mechanism_param=param))
    except (p11.SignatureInvalid, p11.SignatureLenRange):
        return False


def _signing(spec: KeySpec, signing: SigningAlgorithm, signed: bytes) -> tuple[bytes, Mechanism, Any]:
    """What the HSM signs for ``signing`` over ``signed``, with which mechanism and parameter."""
    if spec.key_type is HsmKeyType.EC:
        return signed, Mechanism.ECDSA, None
    if spec.key_type is HsmKeyType.EC_EDWARDS:
        prehashed = any(m.parameter == "Ed25519ph" for m in spec.needs(KeyUsage.SIGN_VERIFY, signing.value))
        return signed, Mechanism.EDDSA, (True, None) if prehashed else None
    if signing.value.startswith("RSASSA_PSS"):
        hash_mechanism, mgf = _HASH_MECHANISMS[SIGNING_HASHES[signing]]
        return signed, Mechanism.RSA_PKCS_PSS, (hash_mechanism, mgf, digest_bytes(signing))
    return public_keys.digest_info(signing, signed), Mechanism.RSA_PKCS, None


def decrypt_oaep(
    token: Token, objects: HsmObjects, algorithm: Algorithm, encryption: EncryptionAlgorithm, ciphertext: bytes
) -> bytes:
    """The plaintext of a raw RSAES-OAEP ciphertext, decrypted in the HSM; DecryptionFailed for every
    failure of the ciphertext, UnsupportedByHsm when the HSM lacks the algorithm's hash."""
    token.capabilities.require(feature(algorithm, KeyUsage.ENCRYPT_DECRYPT, encryption))
    key = _private(token, objects)
    hash_mechanism, mgf = _HASH_MECHANISMS[OAEP_HASHES[encryption]]
    try:
        return bytes(
            key.decrypt(ciphertext, mechanism=Mechanism.RSA_PKCS_OAEP, mechanism_param=(hash_mechanism, mgf, None))
        )
    except LOST:
        raise
    except p11.PKCS11Error:
        raise DecryptionFailed() from None  # bad padding, bad length, wrong key: all look the same


def derive(token: Token, objects: HsmObjects, algorithm: Algorithm, peer_point: bytes) -> bytes:
    """The ECDH shared secret (the x-coordinate, the field's length) of the version's private key and
    the uncompressed ``peer_point`` on its curve, derived in the HSM."""
    token.capabilities.require(feature(algorithm, KeyUsage.KEY_AGREEMENT, "ECDH"))
    spec = spec_of(algorithm)
    assert spec.shared_secret_bytes is not None
    key = _private(token, objects)
    secret = key.derive_key(
        KeyType.GENERIC_SECRET,
        spec.shared_secret_bytes * 8,
        mechanism=Mechanism.ECDH1_DERIVE,
        mechanism_param=(KDF.NULL, None, peer_point),
        template={Attribute.TOKEN: False, Attribute.SENSITIVE: False, Attribute.EXTRACTABLE: True},
    )
    try:
        return bytes(secret[Attribute.VALUE])
    finally:
        with contextlib.suppress(p11.PKCS11Error):
            secret.destroy()


def _private(token: Token, objects: HsmObjects) -> Any:
    if objects.private_label is None:
        raise MissingKeyObject()
    return token.key(objects.private_label, ObjectClass.PRIVATE_KEY)


def _public(token: Token, objects: HsmObjects) -> Any:
    if objects.public_label is None:
        raise MissingKeyObject()
    try:
        return token.session().get_key(object_class=ObjectClass.PUBLIC_KEY, label=objects.public_label)
    except p11.NoSuchKey:
        raise MissingKeyObject() from None
