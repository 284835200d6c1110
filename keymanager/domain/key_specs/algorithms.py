"""The names the table of key types speaks, and the algorithms' own facts.

The key specs by their native names (:class:`Algorithm`), the usages (:class:`KeyUsage`), the
algorithms a usage allows (AWS's names: signing, encryption, key agreement, MAC) and what each
algorithm implies by itself, whatever the key: its hash, the length of its digest, whether it signs
RAW messages only or is verified in the HSM. Which spec allows which algorithm is the rows' to say
(:mod:`keymanager.domain.key_specs.table`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


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
