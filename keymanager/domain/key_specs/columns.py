"""What a row of the table of key types holds: :class:`KeySpec` and its parts.

The HSM's terms a row is written in (PKCS#11 key types, object roles and capabilities, named
without their ``CKK_``/``CKA_`` prefixes), how a symmetric spec seals and how a public key is
shown, a PKCS#11 :class:`Mechanism` a spec needs, and the per-usage entry (:class:`Usage`) of a row.
A new column of the table changes this module; a new spec does not.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from keymanager.domain.key_specs.algorithms import (
    DIGEST_BYTES,
    OAEP_HASHES,
    Algorithm,
    EncryptionAlgorithm,
    KeyUsage,
)


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


RAW_MODES = frozenset({BlockMode.CBC_PAD})
"""The modes of raw keys: used only by a door's raw block-cipher operations (KMIP's), in that mode."""

ONE_AES_OBJECT = frozenset({BlockMode.GCM, BlockMode.CBC_PAD})
"""The modes whose key version is one AES object: KMIP's AES keys, and the keys made exportable."""


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
    xks_spec: str | None = None
    """AWS XKS's ``keySpec`` of the spec (``AES_256``; None: the XKS door does not serve it: its
    metadata names the native spec with no usage, its Encrypt and Decrypt refuse the key)."""
    kmip_algorithm: str | None = None
    """KMIP's Cryptographic Algorithm of the spec, the name of PyKMIP's ``CryptographicAlgorithm``
    member (``AES``, ``HMAC_SHA256``, ``RSA``, ``EC``, ``ED25519``; its Cryptographic Length is
    :attr:`kmip_length`); None: the KMIP door does not name the spec."""

    @property
    def key_bytes(self) -> int:
        """The length of a secret key of the spec (an AES key's, or an HMAC secret's), in bytes."""
        assert self.key_bits is not None and not self.asymmetric
        return self.key_bits // 8

    @property
    def asymmetric(self) -> bool:
        return self.public_key is not None

    @property
    def kmip_length(self) -> int | None:
        """KMIP's Cryptographic Length of the spec: ``key_bits`` or ``curve_bits`` (None: the KMIP
        door does not name the spec)."""
        if self.kmip_algorithm is None:
            return None
        return self.key_bits or self.curve_bits

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
