"""How the rows of the table of key types are made: one builder per family of specs.

Each builder fills a :class:`~keymanager.domain.key_specs.columns.KeySpec` for one spec of its
family (HMAC, RSA, NIST and SECG curves, Ed25519, AES in each block mode, FF1) with the usages, HSM
objects and PKCS#11 mechanisms that family needs; :data:`keymanager.domain.key_specs.table.SPECS`
calls them with each spec's own parameters. A new key type gets a builder here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from keymanager.domain.key_specs.algorithms import (
    Algorithm,
    EncryptionAlgorithm,
    KeyAgreementAlgorithm,
    KeyUsage,
    MacAlgorithm,
    SigningAlgorithm,
)
from keymanager.domain.key_specs.columns import (
    BlockMode,
    Capability,
    HsmKeyType,
    HsmObject,
    KeySpec,
    Mechanism,
    ObjectRole,
    PublicKeyForm,
    Usage,
)

_SECRET, _PRIVATE, _PUBLIC = "SECRET_KEY", "PRIVATE_KEY", "PUBLIC_KEY"
_C = Capability


def hmac_row(algorithm: Algorithm, kms: str, mac: MacAlgorithm, bits: int) -> KeySpec:
    """An HMAC spec (KMS name ``kms``) whose one generic secret of ``bits`` computes ``mac``."""
    mechanism = f"SHA{bits}_HMAC"
    usage = Usage(
        KeyUsage.GENERATE_VERIFY_MAC,
        objects=(HsmObject(ObjectRole.HMAC, _SECRET, (_C.SIGN, _C.VERIFY)),),
        mechanisms=(
            Mechanism("GENERIC_SECRET_KEY_GEN", bits // 8, "GENERATE"),
            Mechanism(mechanism, bits // 8, "SIGN"),
        ),
        algorithms={mac.value: ()},
    )
    return KeySpec(
        algorithm,
        kms,
        HsmKeyType.GENERIC_SECRET,
        {usage.usage: usage},
        usage.usage,
        key_bits=bits,
        transit_type="hmac",
        kmip_algorithm=algorithm.value,
    )


_AES_GEN = Mechanism("AES_KEY_GEN", 32, "GENERATE")
_SYMMETRIC_ENCRYPTION = {EncryptionAlgorithm.SYMMETRIC_DEFAULT.value: ()}


def rsa_row(bits: int) -> KeySpec:
    """The RSA spec of ``bits`` (``RSA_<bits>``): signing (PSS, PKCS#1 v1.5) or encryption (OAEP), no default."""
    gen = Mechanism("RSA_PKCS_KEY_PAIR_GEN", bits, "GENERATE_KEY_PAIR")
    pss = Mechanism("RSA_PKCS_PSS", bits, "SIGN")
    pkcs1 = Mechanism("RSA_PKCS", bits, "SIGN")
    oaep = Mechanism("RSA_PKCS_OAEP", bits, "DECRYPT")
    sign = Usage(
        KeyUsage.SIGN_VERIFY,
        objects=(
            HsmObject(ObjectRole.PRIVATE, _PRIVATE, (_C.SIGN,)),
            HsmObject(ObjectRole.PUBLIC, _PUBLIC, (_C.VERIFY,)),
        ),
        mechanisms=(gen,),
        algorithms={
            SigningAlgorithm.RSASSA_PSS_SHA_256.value: (pss,),
            SigningAlgorithm.RSASSA_PSS_SHA_384.value: (pss,),
            SigningAlgorithm.RSASSA_PSS_SHA_512.value: (pss,),
            SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_256.value: (pkcs1,),
            SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_384.value: (pkcs1,),
            SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_512.value: (pkcs1,),
        },
    )
    encrypt = Usage(
        KeyUsage.ENCRYPT_DECRYPT,
        objects=(
            HsmObject(ObjectRole.PRIVATE, _PRIVATE, (_C.DECRYPT,)),
            HsmObject(ObjectRole.PUBLIC, _PUBLIC, (_C.ENCRYPT,)),
        ),
        mechanisms=(gen,),
        algorithms={
            EncryptionAlgorithm.RSAES_OAEP_SHA_1.value: (oaep,),
            EncryptionAlgorithm.RSAES_OAEP_SHA_256.value: (Mechanism("RSA_PKCS_OAEP", bits, "DECRYPT", "SHA256"),),
        },
    )
    return KeySpec(
        Algorithm(f"RSA_{bits}"),
        f"RSA_{bits}",
        HsmKeyType.RSA,
        {sign.usage: sign, encrypt.usage: encrypt},
        None,
        key_bits=bits,
        public_key=PublicKeyForm.SPKI,
        transit_type=f"rsa-{bits}",
        kmip_algorithm="RSA",
    )


def ec_row(
    algorithm: Algorithm,
    curve: str,
    oid: str,
    bits: int,
    signing: SigningAlgorithm,
    *,
    agreement: bool,
    transit_type: str | None = None,
) -> KeySpec:
    """A Weierstrass-curve spec on ``curve`` (``oid``, ``bits``): signing with ``signing``, and ECDH
    key agreement when ``agreement``."""
    gen = Mechanism("EC_KEY_PAIR_GEN", bits, "GENERATE_KEY_PAIR", curve)
    sign = Usage(
        KeyUsage.SIGN_VERIFY,
        objects=(
            HsmObject(ObjectRole.PRIVATE, _PRIVATE, (_C.SIGN,)),
            HsmObject(ObjectRole.PUBLIC, _PUBLIC, (_C.VERIFY,)),
        ),
        mechanisms=(gen,),
        algorithms={signing.value: (Mechanism("ECDSA", bits, "SIGN"),)},
    )
    usages = {sign.usage: sign}
    if agreement:
        derive = Usage(
            KeyUsage.KEY_AGREEMENT,
            objects=(HsmObject(ObjectRole.PRIVATE, _PRIVATE, (_C.DERIVE,)), HsmObject(ObjectRole.PUBLIC, _PUBLIC, ())),
            mechanisms=(gen,),
            algorithms={KeyAgreementAlgorithm.ECDH.value: (Mechanism("ECDH1_DERIVE", bits, "DERIVE"),)},
        )
        usages[derive.usage] = derive
    return KeySpec(
        algorithm,
        algorithm.value,
        HsmKeyType.EC,
        usages,
        KeyUsage.SIGN_VERIFY,
        curve=curve,
        curve_oid=oid,
        curve_bits=bits,
        kmip_algorithm="EC",
        public_key=PublicKeyForm.SPKI,
        shared_secret_bytes=(bits + 7) // 8,
        transit_type=transit_type,
    )


def ed25519_row() -> KeySpec:
    """The Ed25519 spec: signing only, pure Ed25519 and Ed25519ph."""
    eddsa = Mechanism("EDDSA", 256, "SIGN")
    sign = Usage(
        KeyUsage.SIGN_VERIFY,
        objects=(
            HsmObject(ObjectRole.PRIVATE, _PRIVATE, (_C.SIGN,)),
            HsmObject(ObjectRole.PUBLIC, _PUBLIC, (_C.VERIFY,)),
        ),
        mechanisms=(Mechanism("EC_EDWARDS_KEY_PAIR_GEN", 256, "GENERATE_KEY_PAIR", "ed25519"),),
        algorithms={
            SigningAlgorithm.ED25519_SHA_512.value: (eddsa,),
            SigningAlgorithm.ED25519_PH_SHA_512.value: (Mechanism("EDDSA", 256, "SIGN", "Ed25519ph"),),
        },
    )
    return KeySpec(
        Algorithm.ECC_NIST_EDWARDS25519,
        "ECC_NIST_EDWARDS25519",
        HsmKeyType.EC_EDWARDS,
        {sign.usage: sign},
        KeyUsage.SIGN_VERIFY,
        curve="ed25519",
        curve_oid="1.3.101.112",
        curve_bits=256,
        kmip_algorithm="ED25519",
        public_key=PublicKeyForm.SPKI,
        transit_type="ed25519",
    )


def symmetric_rows() -> tuple[KeySpec, ...]:
    """The AES specs (CBC-HMAC, GCM, CBC-PAD) and FF1, in table order."""
    cbc = Usage(
        KeyUsage.ENCRYPT_DECRYPT,
        objects=(
            HsmObject(ObjectRole.AES, _SECRET, (_C.ENCRYPT, _C.DECRYPT)),
            HsmObject(ObjectRole.HMAC, _SECRET, (_C.SIGN, _C.VERIFY)),
        ),
        mechanisms=(
            _AES_GEN,
            Mechanism("AES_CBC_PAD", 32, "ENCRYPT"),
            Mechanism("AES_CBC_PAD", 32, "DECRYPT"),
            Mechanism("GENERIC_SECRET_KEY_GEN", 32, "GENERATE"),
            Mechanism("SHA256_HMAC", 32, "SIGN"),
        ),
        algorithms=_SYMMETRIC_ENCRYPTION,
    )
    ff1 = Usage(
        KeyUsage.TOKENIZE,
        objects=(HsmObject(ObjectRole.FF1, _SECRET, (_C.ENCRYPT,)),),
        mechanisms=(_AES_GEN, Mechanism("AES_CBC", 32, "ENCRYPT")),
        algorithms={"FF1": ()},
    )
    enc = KeyUsage.ENCRYPT_DECRYPT
    return (
        KeySpec(
            Algorithm.AES_256_CBC_HMAC_SHA256,
            None,
            HsmKeyType.AES,
            {enc: cbc},
            enc,
            key_bits=256,
            format_id=1,
            mode=BlockMode.CBC_HMAC,
        ),
        _gcm_row(
            Algorithm.AES_256_GCM,
            "SYMMETRIC_DEFAULT",
            256,
            format_id=2,
            transit_type="aes256-gcm96",
            xks_spec="AES_256",
        ),
        KeySpec(Algorithm.FF1_AES_256, None, HsmKeyType.AES, {ff1.usage: ff1}, ff1.usage, key_bits=256),
        _gcm_row(Algorithm.AES_128_GCM, None, 128, format_id=3, transit_type="aes128-gcm96"),
        _gcm_row(Algorithm.AES_192_GCM, None, 192, format_id=4),
        _cbc_pad_row(Algorithm.AES_128_CBC_PAD, 128),
        _cbc_pad_row(Algorithm.AES_192_CBC_PAD, 192),
        _cbc_pad_row(Algorithm.AES_256_CBC_PAD, 256),
    )


def _cbc_pad_row(algorithm: Algorithm, bits: int) -> KeySpec:
    """A raw AES-CBC-PAD spec of ``bits``: what KMIP's Create makes unless its Cryptographic Parameters
    name GCM. No KMS name, no format id, no Transit type: no other door and no native format uses it."""
    return _aes_row(algorithm, None, bits, BlockMode.CBC_PAD, "AES_CBC_PAD")


def _gcm_row(
    algorithm: Algorithm,
    kms: str | None,
    bits: int,
    *,
    format_id: int,
    transit_type: str | None = None,
    xks_spec: str | None = None,
) -> KeySpec:
    """An AES-GCM spec of ``bits`` (AWS's ``SYMMETRIC_DEFAULT`` is the 256-bit one; 128 and 192 are
    KMIP's and the native API's)."""
    return _aes_row(
        algorithm,
        kms,
        bits,
        BlockMode.GCM,
        "AES_GCM",
        _SYMMETRIC_ENCRYPTION,
        format_id=format_id,
        transit_type=transit_type,
        xks_spec=xks_spec,
    )


def _aes_row(
    algorithm: Algorithm,
    kms: str | None,
    bits: int,
    mode: BlockMode,
    mechanism: str,
    algorithms: Mapping[str, tuple[Mechanism, ...]] | None = None,
    **names: Any,
) -> KeySpec:
    """A spec of one AES object of ``bits`` that encrypts and decrypts in ``mode`` with ``mechanism``;
    ``names`` are its other columns (``format_id``, the doors' names: ``transit_type``, ``xks_spec``)."""
    size = bits // 8
    usage = Usage(
        KeyUsage.ENCRYPT_DECRYPT,
        objects=(HsmObject(ObjectRole.AES, _SECRET, (_C.ENCRYPT, _C.DECRYPT)),),
        mechanisms=(
            Mechanism("AES_KEY_GEN", size, "GENERATE"),
            Mechanism(mechanism, size, "ENCRYPT"),
            Mechanism(mechanism, size, "DECRYPT"),
        ),
        algorithms=algorithms or {},
    )
    return KeySpec(
        algorithm,
        kms,
        HsmKeyType.AES,
        {usage.usage: usage},
        usage.usage,
        key_bits=bits,
        mode=mode,
        kmip_algorithm="AES",
        **names,
    )
