"""The one table of key types: every key spec the service knows, and everything it implies.

A row (:class:`KeySpec`) says, for one spec: its native name (the ``algorithm`` of a key) and its
AWS KMS ``KeySpec``; the usages it may be created for and the default; per usage, the algorithms
it allows (encryption, signing, MAC, key agreement, tokens: AWS's names); the HSM objects of one
key version (key type, size or curve, and per object the capabilities the usage needs); how its
public key is shown; and the PKCS#11 mechanisms each usage and each algorithm needs. Every other
module asks this table (as Vault's ``keysutil.KeyType`` methods are asked), instead of keeping a
list of its own: key use (``services/key_use.py``), HSM templates and operations (``hsm/``), the
capabilities check, the schemas, the audit, the KMS and KMIP mappings. ``tests/domain/
test_key_specs.py`` fails when a spec lacks a row or a consumer spells a spec list out itself.

Mechanisms are named as PKCS#11 does without the ``CKM_`` prefix (``"RSA_PKCS_PSS"``): the domain
imports no PKCS#11 binding; ``hsm/capabilities.py`` turns the names into mechanisms. A
:class:`Mechanism` may carry a ``parameter`` (e.g. OAEP's hash): a module may list a mechanism and
still refuse some of its parameters (SoftHSM 2.6.1: OAEP with SHA-256 answers ``ArgumentsBad``),
so such needs are probed once at start (``hsm/mechanism_probes.py``).

How to add a spec: ``docs/architecture.md`` ("How to add a key spec").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Algorithm(enum.StrEnum):
    """The key specs by their native names (a key's ``algorithm``); each has one row in :data:`SPECS`."""

    AES_256_CBC_HMAC_SHA256 = "AES_256_CBC_HMAC_SHA256"
    AES_256_GCM = "AES_256_GCM"
    AES_128_GCM = "AES_128_GCM"
    AES_192_GCM = "AES_192_GCM"
    HMAC_SHA256 = "HMAC_SHA256"
    FF1_AES_256 = "FF1_AES_256"
    HMAC_SHA224 = "HMAC_SHA224"
    HMAC_SHA384 = "HMAC_SHA384"
    HMAC_SHA512 = "HMAC_SHA512"
    RSA_2048 = "RSA_2048"
    RSA_3072 = "RSA_3072"
    RSA_4096 = "RSA_4096"
    ECC_NIST_P256 = "ECC_NIST_P256"
    ECC_NIST_P384 = "ECC_NIST_P384"
    ECC_NIST_P521 = "ECC_NIST_P521"
    ECC_SECG_P256K1 = "ECC_SECG_P256K1"
    ECC_NIST_EDWARDS25519 = "ECC_NIST_EDWARDS25519"
    AES_128_CBC_PAD = "AES_128_CBC_PAD"
    AES_192_CBC_PAD = "AES_192_CBC_PAD"
    AES_256_CBC_PAD = "AES_256_CBC_PAD"


class KeyUsage(enum.StrEnum):
    """What a key is for (AWS ``KeyUsage``, plus the native ``TOKENIZE`` of FF1 keys)."""

    ENCRYPT_DECRYPT = "ENCRYPT_DECRYPT"
    SIGN_VERIFY = "SIGN_VERIFY"
    GENERATE_VERIFY_MAC = "GENERATE_VERIFY_MAC"
    KEY_AGREEMENT = "KEY_AGREEMENT"
    TOKENIZE = "TOKENIZE"


class SigningAlgorithm(enum.StrEnum):
    """AWS ``SigningAlgorithmSpec``."""

    RSASSA_PSS_SHA_256 = "RSASSA_PSS_SHA_256"
    RSASSA_PSS_SHA_384 = "RSASSA_PSS_SHA_384"
    RSASSA_PSS_SHA_512 = "RSASSA_PSS_SHA_512"
    RSASSA_PKCS1_V1_5_SHA_256 = "RSASSA_PKCS1_V1_5_SHA_256"
    RSASSA_PKCS1_V1_5_SHA_384 = "RSASSA_PKCS1_V1_5_SHA_384"
    RSASSA_PKCS1_V1_5_SHA_512 = "RSASSA_PKCS1_V1_5_SHA_512"
    ECDSA_SHA_256 = "ECDSA_SHA_256"
    ECDSA_SHA_384 = "ECDSA_SHA_384"
    ECDSA_SHA_512 = "ECDSA_SHA_512"
    ED25519_SHA_512 = "ED25519_SHA_512"
    ED25519_PH_SHA_512 = "ED25519_PH_SHA_512"


class EncryptionAlgorithm(enum.StrEnum):
    """AWS ``EncryptionAlgorithmSpec``."""

    SYMMETRIC_DEFAULT = "SYMMETRIC_DEFAULT"
    RSAES_OAEP_SHA_1 = "RSAES_OAEP_SHA_1"
    RSAES_OAEP_SHA_256 = "RSAES_OAEP_SHA_256"


class KeyAgreementAlgorithm(enum.StrEnum):
    """AWS ``KeyAgreementAlgorithmSpec``."""

    ECDH = "ECDH"


class MacAlgorithm(enum.StrEnum):
    """AWS ``MacAlgorithmSpec``."""

    HMAC_SHA_224 = "HMAC_SHA_224"
    HMAC_SHA_256 = "HMAC_SHA_256"
    HMAC_SHA_384 = "HMAC_SHA_384"
    HMAC_SHA_512 = "HMAC_SHA_512"


class MessageType(enum.StrEnum):
    """What a signing request's message is (AWS ``MessageType``)."""

    RAW = "RAW"
    DIGEST = "DIGEST"


class Hash(enum.StrEnum):
    """Digests the algorithms use, by ``hashlib`` name; :data:`DIGEST_BYTES` gives their lengths."""

    SHA1 = "sha1"
    SHA224 = "sha224"
    SHA256 = "sha256"
    SHA384 = "sha384"
    SHA512 = "sha512"


DIGEST_BYTES: Mapping[Hash, int] = {Hash.SHA1: 20, Hash.SHA224: 28, Hash.SHA256: 32, Hash.SHA384: 48, Hash.SHA512: 64}
"""The length of each digest, in bytes."""

MAX_RAW_MESSAGE_BYTES = 4096
"""The longest RAW message a sign or verify request may carry (as AWS)."""


class Capability(enum.StrEnum):
    """A PKCS#11 capability flag of a key object (``CKA_<name>``)."""

    ENCRYPT = "ENCRYPT"
    DECRYPT = "DECRYPT"
    SIGN = "SIGN"
    VERIFY = "VERIFY"
    WRAP = "WRAP"
    UNWRAP = "UNWRAP"
    DERIVE = "DERIVE"


class HsmKeyType(enum.StrEnum):
    """The PKCS#11 key type of a spec's objects (``CKK_<name>``)."""

    AES = "AES"
    GENERIC_SECRET = "GENERIC_SECRET"  # noqa: S105 (a PKCS#11 key type, not a secret)
    RSA = "RSA"
    EC = "EC"
    EC_EDWARDS = "EC_EDWARDS"


class ObjectRole(enum.StrEnum):
    """Which object of a key version an HSM object is; the value ends its label (``km/<id>/v<n>/<value>``)."""

    AES = "aes"
    HMAC = "hmac"
    FF1 = "ff1"
    PRIVATE = "private"
    PUBLIC = "public"


class BlockMode(enum.StrEnum):
    """How a symmetric encrypting spec seals a ciphertext (None for every other spec)."""

    CBC_HMAC = "CBC_HMAC"
    """AES-CBC with PKCS#7 padding, then HMAC-SHA256 over it (an AES and an HMAC object)."""
    GCM = "GCM"
    """AES-GCM (one AES object), nonces made by the service; KMIP's Encrypt and Decrypt use it in GCM only."""
    CBC_PAD = "CBC_PAD"
    """Raw AES-CBC with PKCS#7 padding, IVs made by the service (one AES object): KMIP's Encrypt and
    Decrypt only (libmongocrypt's delegated keys, PyKMIP), never a native or another door's format."""


class PublicKeyForm(enum.StrEnum):
    """How a spec's public key is shown (None for a symmetric spec)."""

    SPKI = "SPKI"
    """DER SubjectPublicKeyInfo (RFC 5280), as AWS's ``GetPublicKey`` returns it."""


@dataclass(frozen=True)
class Mechanism:
    """One PKCS#11 mechanism a spec needs: its name without ``CKM_``, for keys of ``key_size`` (the
    mechanism's unit: bytes for AES and generic secrets, bits for RSA and EC; None: any), for the
    use ``flag`` (``CKF_<flag>``; None: any), with ``parameter`` (None: the mechanism alone; else a
    parameter the token may refuse although it lists the mechanism, probed at start)."""

    name: str
    key_size: int | None = None
    flag: str | None = None
    parameter: str | None = None


@dataclass(frozen=True)
class HsmObject:
    """One HSM object of a key version: its role, its PKCS#11 class and the capabilities it gets
    (every other capability off); ``token`` False for an object made only for the operation."""

    role: ObjectRole
    object_class: str
    """``SECRET_KEY``, ``PRIVATE_KEY`` or ``PUBLIC_KEY`` (PKCS#11's ``CKO_<name>``)."""
    capabilities: tuple[Capability, ...]


@dataclass(frozen=True)
class Usage:
    """What a spec allows for one usage: the algorithms and operations, the objects, the mechanisms."""

    usage: KeyUsage
    objects: tuple[HsmObject, ...]
    """The HSM objects of one key version under this usage, each with only the capabilities it needs."""
    mechanisms: tuple[Mechanism, ...]
    """Mechanisms every key of this usage needs (generation and the usage's base operation)."""
    algorithms: Mapping[str, tuple[Mechanism, ...]] = field(default_factory=dict)
    """The algorithms (AWS names) the usage allows, each with the mechanisms it needs on top."""

    def algorithm_names(self) -> tuple[str, ...]:
        return tuple(self.algorithms)


@dataclass(frozen=True)
class KeySpec:
    """One row of the table of key types."""

    algorithm: Algorithm
    kms_spec: str | None
    """AWS ``KeySpec`` (None: the spec has no KMS name, e.g. FF1)."""
    key_type: HsmKeyType
    usages: Mapping[KeyUsage, Usage]
    default_usage: KeyUsage | None
    """The usage a create that names none gets (None: a create must name one, e.g. RSA)."""
    key_bits: int | None = None
    """RSA modulus bits, or secret key bits (None for EC)."""
    curve: str | None = None
    """The named curve (RFC 5480 / RFC 8410 name, as ``cryptography`` and asn1crypto call it)."""
    curve_oid: str | None = None
    curve_bits: int | None = None
    """The named curve's size in bits (what PKCS#11's mechanism sizes and KMIP's Cryptographic Length say)."""
    public_key: PublicKeyForm | None = None
    shared_secret_bytes: int | None = None
    """The length of an ECDH shared secret (the field size), the length the derive template needs."""
    format_id: int | None = None
    """The algorithm id the binary ciphertext formats carry (the KMS ``CiphertextBlob``, the envelope
    stream header); None for a spec those formats do not seal with."""
    mode: BlockMode | None = None
    """How the spec's AES object seals (None: the spec does not encrypt with AES)."""
    transit_type: str | None = None
    """Vault Transit's name of the key type (``aes256-gcm96``, ``hmac``, ``ecdsa-p256``, …; None: the
    Transit door does not serve the spec). Several HMAC rows share ``hmac``, told apart by key size."""

    @property
    def key_bytes(self) -> int:
        """The length of a secret key of the spec (an AES key's, or an HMAC secret's), in bytes."""
        assert self.key_bits is not None and not self.asymmetric
        return self.key_bits // 8

    @property
    def asymmetric(self) -> bool:
        return self.public_key is not None

    def usage(self, usage: KeyUsage) -> Usage:
        """The row's entry for ``usage``; KeyError if the spec does not allow it."""
        return self.usages[usage]

    def allowed(self, usage: KeyUsage) -> bool:
        return usage in self.usages

    def algorithms(self, usage: KeyUsage) -> tuple[str, ...]:
        """The algorithms (AWS names) a key of this spec and ``usage`` accepts (empty for none)."""
        entry = self.usages.get(usage)
        return () if entry is None else entry.algorithm_names()

    def needs(self, usage: KeyUsage, algorithm: str | None = None) -> tuple[Mechanism, ...]:
        """The mechanisms a key of ``usage`` needs, with those of ``algorithm`` when given."""
        entry = self.usages[usage]
        extra = entry.algorithms.get(algorithm, ()) if algorithm is not None else ()
        return (*entry.mechanisms, *extra)

    def rsa_oaep_max_plaintext(self, algorithm: EncryptionAlgorithm) -> int:
        """The longest plaintext RSAES-OAEP with ``algorithm``'s hash takes under this key (RFC 8017)."""
        assert self.key_bits is not None
        return self.key_bits // 8 - 2 * DIGEST_BYTES[OAEP_HASHES[algorithm]] - 2


# -- the algorithms' own facts ----------------------------------------------------------

SIGNING_HASHES: Mapping[SigningAlgorithm, Hash] = {
    SigningAlgorithm.RSASSA_PSS_SHA_256: Hash.SHA256,
    SigningAlgorithm.RSASSA_PSS_SHA_384: Hash.SHA384,
    SigningAlgorithm.RSASSA_PSS_SHA_512: Hash.SHA512,
    SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_256: Hash.SHA256,
    SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_384: Hash.SHA384,
    SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_512: Hash.SHA512,
    SigningAlgorithm.ECDSA_SHA_256: Hash.SHA256,
    SigningAlgorithm.ECDSA_SHA_384: Hash.SHA384,
    SigningAlgorithm.ECDSA_SHA_512: Hash.SHA512,
    SigningAlgorithm.ED25519_SHA_512: Hash.SHA512,
    SigningAlgorithm.ED25519_PH_SHA_512: Hash.SHA512,
}
"""The hash of each signing algorithm: a DIGEST message must be as long as its digest."""

SIGNS_RAW_ONLY = frozenset({SigningAlgorithm.ED25519_SHA_512})
"""Algorithms that sign the message itself, never a digest (pure Ed25519: AWS takes RAW only)."""

VERIFIED_IN_HSM = frozenset({SigningAlgorithm.ED25519_PH_SHA_512})
"""Algorithms whose signatures are verified in the HSM with the public key object: ``cryptography``
has no Ed25519ph. Every other signature is verified with the stored public key in ``cryptography``."""

OAEP_HASHES: Mapping[EncryptionAlgorithm, Hash] = {
    EncryptionAlgorithm.RSAES_OAEP_SHA_1: Hash.SHA1,
    EncryptionAlgorithm.RSAES_OAEP_SHA_256: Hash.SHA256,
}
"""The hash (and MGF1 hash) of each RSAES-OAEP algorithm."""

MAC_HASHES: Mapping[MacAlgorithm, Hash] = {
    MacAlgorithm.HMAC_SHA_224: Hash.SHA224,
    MacAlgorithm.HMAC_SHA_256: Hash.SHA256,
    MacAlgorithm.HMAC_SHA_384: Hash.SHA384,
    MacAlgorithm.HMAC_SHA_512: Hash.SHA512,
}


def digest_bytes(algorithm: SigningAlgorithm) -> int:
    """The length a DIGEST message must have for ``algorithm``."""
    return DIGEST_BYTES[SIGNING_HASHES[algorithm]]


# -- the rows ---------------------------------------------------------------------------

_SECRET, _PRIVATE, _PUBLIC = "SECRET_KEY", "PRIVATE_KEY", "PUBLIC_KEY"
_C = Capability


def _hmac_row(algorithm: Algorithm, kms: str, mac: MacAlgorithm, bits: int) -> KeySpec:
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
        algorithm, kms, HsmKeyType.GENERIC_SECRET, {usage.usage: usage}, usage.usage, key_bits=bits, transit_type="hmac"
    )


_AES_GEN = Mechanism("AES_KEY_GEN", 32, "GENERATE")
_SYMMETRIC_ENCRYPTION = {EncryptionAlgorithm.SYMMETRIC_DEFAULT.value: ()}


def _rsa_row(bits: int) -> KeySpec:
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
    )


def _ec_row(
    algorithm: Algorithm,
    curve: str,
    oid: str,
    bits: int,
    signing: SigningAlgorithm,
    *,
    agreement: bool,
    transit_type: str | None = None,
) -> KeySpec:
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
        public_key=PublicKeyForm.SPKI,
        shared_secret_bytes=(bits + 7) // 8,
        transit_type=transit_type,
    )


def _ed25519_row() -> KeySpec:
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
        public_key=PublicKeyForm.SPKI,
        transit_type="ed25519",
    )


def _symmetric_rows() -> tuple[KeySpec, ...]:
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
        _gcm_row(Algorithm.AES_256_GCM, "SYMMETRIC_DEFAULT", 256, format_id=2, transit_type="aes256-gcm96"),
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
    algorithm: Algorithm, kms: str | None, bits: int, *, format_id: int, transit_type: str | None = None
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
    )


def _aes_row(
    algorithm: Algorithm,
    kms: str | None,
    bits: int,
    mode: BlockMode,
    mechanism: str,
    algorithms: Mapping[str, tuple[Mechanism, ...]] | None = None,
    *,
    format_id: int | None = None,
    transit_type: str | None = None,
) -> KeySpec:
    """A spec of one AES object of ``bits`` that encrypts and decrypts in ``mode`` with ``mechanism``."""
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
        format_id=format_id,
        mode=mode,
        transit_type=transit_type,
    )


SPECS: Mapping[Algorithm, KeySpec] = {
    spec.algorithm: spec
    for spec in (
        *_symmetric_rows(),
        _hmac_row(Algorithm.HMAC_SHA224, "HMAC_224", MacAlgorithm.HMAC_SHA_224, 224),
        _hmac_row(Algorithm.HMAC_SHA256, "HMAC_256", MacAlgorithm.HMAC_SHA_256, 256),
        _hmac_row(Algorithm.HMAC_SHA384, "HMAC_384", MacAlgorithm.HMAC_SHA_384, 384),
        _hmac_row(Algorithm.HMAC_SHA512, "HMAC_512", MacAlgorithm.HMAC_SHA_512, 512),
        _rsa_row(2048),
        _rsa_row(3072),
        _rsa_row(4096),
        _ec_row(
            Algorithm.ECC_NIST_P256,
            "secp256r1",
            "1.2.840.10045.3.1.7",
            256,
            SigningAlgorithm.ECDSA_SHA_256,
            agreement=True,
            transit_type="ecdsa-p256",
        ),
        _ec_row(
            Algorithm.ECC_NIST_P384,
            "secp384r1",
            "1.3.132.0.34",
            384,
            SigningAlgorithm.ECDSA_SHA_384,
            agreement=True,
            transit_type="ecdsa-p384",
        ),
        _ec_row(
            Algorithm.ECC_NIST_P521,
            "secp521r1",
            "1.3.132.0.35",
            521,
            SigningAlgorithm.ECDSA_SHA_512,
            agreement=True,
            transit_type="ecdsa-p521",
        ),
        _ec_row(
            Algorithm.ECC_SECG_P256K1, "secp256k1", "1.3.132.0.10", 256, SigningAlgorithm.ECDSA_SHA_256, agreement=False
        ),
        _ed25519_row(),
    )
}
"""Every key spec, by native name: the one table (a spec without a row cannot be created)."""


def spec_of(algorithm: Algorithm) -> KeySpec:
    """The row of ``algorithm``."""
    return SPECS[algorithm]


def specs_for(usage: KeyUsage) -> tuple[Algorithm, ...]:
    """The specs that allow ``usage``, in table order."""
    return tuple(a for a, spec in SPECS.items() if spec.allowed(usage))


def by_kms_spec(kms_spec: str) -> KeySpec | None:
    """The row whose AWS ``KeySpec`` is ``kms_spec`` (None when no spec has that KMS name)."""
    return next((spec for spec in SPECS.values() if spec.kms_spec == kms_spec), None)


def implied_usage(algorithm: Algorithm) -> KeyUsage:
    """The usage of a key stored without one (keys made before usages existed): the spec's default."""
    usage = SPECS[algorithm].default_usage
    assert usage is not None, f"{algorithm} has no default usage"
    return usage


def choose_usage(algorithm: Algorithm, usage: KeyUsage | None) -> KeyUsage:
    """The usage a new key of ``algorithm`` gets when its creator asks for ``usage`` (None: none named);
    ValueError naming what the spec allows when it is not allowed or must be named."""
    spec = SPECS[algorithm]
    allowed = ", ".join(spec.usages)
    if usage is None:
        if spec.default_usage is None:
            raise ValueError(f"a {algorithm} key needs a usage: one of {allowed}")
        return spec.default_usage
    if usage not in spec.usages:
        raise ValueError(f"a {algorithm} key cannot have usage {usage}: it allows {allowed}")
    return usage


CURVE_OIDS: Mapping[str, str] = {spec.curve: spec.curve_oid for spec in SPECS.values() if spec.curve and spec.curve_oid}
"""The object identifier of each named curve of the table."""

FORMAT_IDS: Mapping[Algorithm, int] = {a: spec.format_id for a, spec in SPECS.items() if spec.format_id is not None}
"""The algorithm ids of the binary ciphertext formats (``domain/kms_blob.py``, ``domain/stream.py``)."""

SYMMETRIC = tuple(a for a, spec in SPECS.items() if not spec.asymmetric)
"""The specs with secret keys only (their versions are made by ``Hsm.generate_version``)."""

ASYMMETRIC = tuple(a for a, spec in SPECS.items() if spec.asymmetric)
"""The specs with a private and a public key."""

DATA_KEY_PAIR_SPECS = tuple(a for a in ASYMMETRIC if SPECS[a].kms_spec is not None)
"""The specs ``GenerateDataKeyPair`` makes (AWS's ``DataKeyPairSpec``: every asymmetric spec, Ed25519 too)."""

RAW_MODES = frozenset({BlockMode.CBC_PAD})
"""The modes of raw keys: used only by a door's raw block-cipher operations (KMIP's), in that mode."""

ONE_AES_OBJECT = frozenset({BlockMode.GCM, BlockMode.CBC_PAD})
"""The modes whose key version is one AES object: KMIP's AES keys, and the keys made exportable."""

HMAC_KEY_BITS: Mapping[Algorithm, int] = {
    a: spec.key_bits for a, spec in SPECS.items() if KeyUsage.GENERATE_VERIFY_MAC in spec.usages and spec.key_bits
}
"""The MAC specs (keys that only compute MACs) and the size of their secrets: as long as the digest."""
