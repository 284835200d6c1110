"""Asymmetric key versions in the token: made as the table of key types says, read back, used, destroyed.

Every spec and usage of the table runs on every token: where the token lacks what it needs (its
mechanisms, or a parameter the start-time probes found refused), the test asserts the refusal
by name instead (nothing is skipped).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pkcs11 import Attribute, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain import public_keys
from keymanager.domain.credentials import new_id
from keymanager.domain.key_specs import (
    ASYMMETRIC,
    SIGNING_HASHES,
    SIGNS_RAW_ONLY,
    SPECS,
    Algorithm,
    Capability,
    EncryptionAlgorithm,
    KeyUsage,
    MessageType,
    ObjectRole,
    SigningAlgorithm,
)
from keymanager.errors import DecryptionFailed, UnsupportedByHsm
from keymanager.hsm import Hsm, key_pairs
from keymanager.hsm.capabilities import FEATURES, feature
from keymanager.hsm.readback import TemplateNotHonoured
from keymanager.services.container import Services
from keymanager.services.key_creation import NewKey

CASES = [(spec, usage) for spec in ASYMMETRIC for usage in SPECS[spec].usages]
_PRIVATE_ONLY = (Capability.DECRYPT, Capability.SIGN, Capability.UNWRAP, Capability.DERIVE)
_PUBLIC_ONLY = (Capability.ENCRYPT, Capability.VERIFY, Capability.WRAP, Capability.DERIVE)


def _objects(hsm: Hsm, label: str) -> list[tuple[Any, dict[Attribute, Any]]]:
    """Every key object labelled ``label`` with the attributes the tests read."""

    def read(token: Any) -> list[tuple[Any, dict[Attribute, Any]]]:
        found = []
        for object_class in (ObjectClass.PRIVATE_KEY, ObjectClass.PUBLIC_KEY, ObjectClass.SECRET_KEY):
            for obj in token.session().get_objects({Attribute.CLASS: object_class, Attribute.LABEL: label}):
                found.append((object_class, _attributes(obj, object_class)))
        return found

    return hsm.call(read)


def _attributes(obj: Any, object_class: ObjectClass) -> dict[Attribute, Any]:
    names = [Attribute.TOKEN, Attribute.PRIVATE]
    if object_class is ObjectClass.PRIVATE_KEY:
        names += [Attribute.SENSITIVE, Attribute.EXTRACTABLE, Attribute.ALWAYS_SENSITIVE, Attribute.NEVER_EXTRACTABLE]
        names += [Attribute[c.value] for c in _PRIVATE_ONLY]
    else:
        names += [Attribute[c.value] for c in _PUBLIC_ONLY]
    read = {name: obj[name] for name in names}
    if object_class is ObjectClass.PRIVATE_KEY:
        secret = Attribute.PRIVATE_EXPONENT if obj[Attribute.KEY_TYPE] == 0 else Attribute.VALUE
        try:
            obj[secret]
            read[secret] = "readable"
        except (p11.AttributeSensitive, p11.AttributeTypeInvalid):
            read[secret] = "unreadable"
    return read


@pytest.mark.parametrize(("spec", "usage"), CASES, ids=[f"{s}-{u}" for s, u in CASES])
def test_a_key_pair_is_made_as_its_row_says_and_read_back(hsm: Hsm, spec: Algorithm, usage: KeyUsage) -> None:
    key_id = new_id()
    if not hsm.capabilities().has(feature(spec, usage)):
        with pytest.raises(UnsupportedByHsm, match=f"{spec} {usage} .no CKM_"):
            hsm.generate_key_pair(key_id, 1, spec, usage)
        assert hsm.find_labels(f"km/{key_id}/") == []
        return
    objects, spki = hsm.generate_key_pair(key_id, 1, spec, usage)
    try:
        row = {o.role: o for o in SPECS[spec].usage(usage).objects}
        assert hsm.find_labels(f"km/{key_id}/") == sorted(objects.labels())
        [(cls, private)] = _objects(hsm, objects.private_label or "")
        assert cls is ObjectClass.PRIVATE_KEY
        assert private.pop(Attribute.PRIVATE_EXPONENT, private.pop(Attribute.VALUE, None)) == "unreadable"
        granted = set(row[ObjectRole.PRIVATE].capabilities)
        assert private == {
            Attribute.TOKEN: True,
            Attribute.PRIVATE: True,
            Attribute.SENSITIVE: True,
            Attribute.EXTRACTABLE: False,
            Attribute.ALWAYS_SENSITIVE: True,
            Attribute.NEVER_EXTRACTABLE: True,
            **{Attribute[c.value]: c in granted for c in _PRIVATE_ONLY},
        }
        [(cls, public)] = _objects(hsm, objects.public_label or "")
        granted = set(row[ObjectRole.PUBLIC].capabilities)
        assert cls is ObjectClass.PUBLIC_KEY
        assert public == {
            Attribute.TOKEN: True,
            Attribute.PRIVATE: False,
            **{Attribute[c.value]: c in granted for c in _PUBLIC_ONLY},
        }
        loaded = serialization.load_der_public_key(spki)
        if SPECS[spec].key_bits is not None:
            assert isinstance(loaded, rsa.RSAPublicKey) and loaded.key_size == SPECS[spec].key_bits
        elif SPECS[spec].curve != "ed25519":
            assert isinstance(loaded, ec.EllipticCurvePublicKey) and loaded.curve.name == SPECS[spec].curve
    finally:
        hsm.destroy_version(objects)
    assert hsm.find_labels(f"km/{key_id}/") == []


SIGNING = [
    (s, a)
    for s in ASYMMETRIC
    if SPECS[s].allowed(KeyUsage.SIGN_VERIFY)
    for a in SPECS[s].algorithms(KeyUsage.SIGN_VERIFY)
]


@pytest.mark.parametrize(("spec", "algorithm"), SIGNING, ids=[f"{s}-{a}" for s, a in SIGNING])
def test_every_signature_the_hsm_makes_verifies_with_the_public_key(hsm: Hsm, spec: Algorithm, algorithm: str) -> None:
    if not hsm.capabilities().has(feature(spec, KeyUsage.SIGN_VERIFY)):
        return  # the refusal of the spec is the test above
    objects, spki = hsm.generate_key_pair(new_id(), 1, spec, KeyUsage.SIGN_VERIFY)
    signing = SigningAlgorithm(algorithm)
    message = b"signed in the HSM"
    signed = message if signing in SIGNS_RAW_ONLY else hashlib.new(SIGNING_HASHES[signing].value, message).digest()
    try:
        if not hsm.capabilities().has(feature(spec, KeyUsage.SIGN_VERIFY, algorithm)):
            with pytest.raises(UnsupportedByHsm, match=f"{algorithm} .no CKM_"):
                asyncio.run(hsm.asign(objects, spec, signing, signed))
            return
        signature = asyncio.run(hsm.asign(objects, spec, signing, signed))
        assert public_keys.verify(spki, signing, message, MessageType.RAW, signature)
        assert not public_keys.verify(spki, signing, message + b"!", MessageType.RAW, signature)
        # The HSM's own verification (used where cryptography cannot verify) agrees.
        assert asyncio.run(hsm.averify(objects, spec, signing, signed, signature))
        assert not asyncio.run(hsm.averify(objects, spec, signing, signed, signature[:-1] + bytes([signature[-1] ^ 1])))
    finally:
        hsm.destroy_version(objects)


def test_a_bad_oaep_ciphertext_is_decryption_failed_and_a_good_one_opens(hsm: Hsm) -> None:
    objects, spki = hsm.generate_key_pair(new_id(), 1, Algorithm.RSA_2048, KeyUsage.ENCRYPT_DECRYPT)
    algorithm = EncryptionAlgorithm.RSAES_OAEP_SHA_1
    try:
        sealed = public_keys.oaep_encrypt(spki, algorithm, b"opened in the HSM")
        assert asyncio.run(hsm.adecrypt_oaep(objects, Algorithm.RSA_2048, algorithm, sealed)) == b"opened in the HSM"
        for bad in (sealed[:-1] + bytes([sealed[-1] ^ 1]), bytes(256), sealed[:128]):
            with pytest.raises(DecryptionFailed):
                asyncio.run(hsm.adecrypt_oaep(objects, Algorithm.RSA_2048, algorithm, bad))
    finally:
        hsm.destroy_version(objects)


def test_parameters_the_probes_found_refused_are_refused_by_name(hsm: Hsm) -> None:
    capabilities = hsm.capabilities()
    for name, needs in FEATURES.items():
        for need in needs:
            if need.parameter is None or (need.mechanism, need.parameter) in capabilities.parameters:
                continue
            # Named with the first need the token lacks: this parameter, or (openCryptoki has no
            # Ed25519 at all) a mechanism the feature needs before it.
            with pytest.raises(UnsupportedByHsm, match=f"does not support {name} .no CKM_") as refused:
                capabilities.require(name)
            said = str(refused.value)
            assert f"no CKM_{need.mechanism.name} (with {need.parameter}" in said or "GENERATE_KEY_PAIR" in said
            assert name in capabilities.summary()["unsupported"]


def test_a_private_half_not_as_asked_leaves_no_half_and_no_key(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = key_pairs.check_object
    calls: list[int] = []

    def fails_on_the_private_key(obj: Any, template: Any, length: int | None = None) -> None:
        calls.append(1)
        if len(calls) == 1:  # the fault: the token did not honour the private key's template
            obj.destroy()
            raise TemplateNotHonoured("CKA_SENSITIVE")
        original(obj, template, length)

    monkeypatch.setattr(key_pairs, "check_object", fails_on_the_private_key)
    # The fault is injected where the generation runs: here, not in the key-pair lane's child process.
    monkeypatch.setattr(
        services.hsm,
        "generate_key_pair",
        lambda *args: services.hsm.call(key_pairs.generate_key_pair, *args, deadline=60.0),
    )
    algorithm = _a_signing_spec_of(services.hsm)
    before = set(services.hsm.find_labels("km/"))
    with pytest.raises(TemplateNotHonoured):
        services.keys.create(NewKey(f"half-{new_id()[:8]}", algorithm=algorithm, usage=KeyUsage.SIGN_VERIFY))
    assert set(services.hsm.find_labels("km/")) == before  # neither half
    assert [k for k in services.store.list_keys() if k.name.startswith("half-")] == []  # no row


def _a_signing_spec_of(hsm: Hsm) -> Algorithm:
    """P-256 where the token makes EC key pairs (openCryptoki's soft token does not), else RSA-2048."""
    for algorithm in (Algorithm.ECC_NIST_P256, Algorithm.RSA_2048):
        try:
            hsm.capabilities().require(f"{algorithm.value} SIGN_VERIFY")
        except UnsupportedByHsm:
            continue
        return algorithm
    raise AssertionError("the token makes neither P-256 nor RSA-2048 key pairs")
