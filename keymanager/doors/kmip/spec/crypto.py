"""The KMIP door's own names of the cryptographic concepts (algorithms, modes, paddings, hashes,
signature algorithms) and of the standard attributes.

Each value is the specification's (wire numbers; an attribute's name as the specification spells it);
the codec (``doors/kmip/codec/``) maps a protocol library's values to these and back."""

from __future__ import annotations

from enum import Enum


class CryptographicAlgorithm(Enum):
    """A Cryptographic Algorithm."""

    DES = 1
    TRIPLE_DES = 2
    AES = 3
    RSA = 4
    DSA = 5
    ECDSA = 6
    HMAC_SHA1 = 7
    HMAC_SHA224 = 8
    HMAC_SHA256 = 9
    HMAC_SHA384 = 10
    HMAC_SHA512 = 11
    HMAC_MD5 = 12
    DH = 13
    ECDH = 14
    ECMQV = 15
    BLOWFISH = 16
    CAMELLIA = 17
    CAST5 = 18
    IDEA = 19
    MARS = 20
    RC2 = 21
    RC4 = 22
    RC5 = 23
    SKIPJACK = 24
    TWOFISH = 25
    EC = 26
    ONE_TIME_PAD = 27
    CHACHA20 = 28
    POLY1305 = 29
    CHACHA20_POLY1305 = 30
    SHA3_224 = 31
    SHA3_256 = 32
    SHA3_384 = 33
    SHA3_512 = 34
    HMAC_SHA3_224 = 35
    HMAC_SHA3_256 = 36
    HMAC_SHA3_384 = 37
    HMAC_SHA3_512 = 38
    SHAKE_128 = 39
    SHAKE_256 = 40
    ARIA = 41
    SEED = 42
    SM2 = 43
    SM3 = 44
    SM4 = 45
    GOST_R_34_10_2012 = 46
    GOST_R_34_11_2012 = 47
    GOST_R_34_13_2015 = 48
    GOST_28147_89 = 49
    XMSS = 50
    SPHINCS_256 = 51
    MCELIECE = 52
    MCELIECE_6960119 = 53
    MCELIECE_8192128 = 54
    ED25519 = 55
    ED448 = 56


class BlockCipherMode(Enum):
    """A Block Cipher Mode of Cryptographic Parameters."""

    CBC = 1
    ECB = 2
    PCBC = 3
    CFB = 4
    OFB = 5
    CTR = 6
    CMAC = 7
    CCM = 8
    GCM = 9
    CBC_MAC = 10
    XTS = 11
    AES_KEY_WRAP_PADDING = 12
    NIST_KEY_WRAP = 13
    X9_102_AESKW = 14
    X9_102_TDKW = 15
    X9_102_AKW1 = 16
    X9_102_AKW2 = 17
    AEAD = 18


class PaddingMethod(Enum):
    """A Padding Method of Cryptographic Parameters."""

    NONE = 1
    OAEP = 2
    PKCS5 = 3
    SSL3 = 4
    ZEROS = 5
    ANSI_X923 = 6
    ISO_10126 = 7
    PKCS1v15 = 8
    X931 = 9
    PSS = 10


class HashingAlgorithm(Enum):
    """A Hashing Algorithm."""

    MD2 = 1
    MD4 = 2
    MD5 = 3
    SHA_1 = 4
    SHA_224 = 5
    SHA_256 = 6
    SHA_384 = 7
    SHA_512 = 8
    RIPEMD_160 = 9
    TIGER = 10
    WHIRLPOOL = 11
    SHA_512_224 = 12
    SHA_512_256 = 13
    SHA3_224 = 14
    SHA3_256 = 15
    SHA3_384 = 16
    SHA3_512 = 17


class DigitalSignatureAlgorithm(Enum):
    """A Digital Signature Algorithm."""

    MD2_WITH_RSA_ENCRYPTION = 1
    MD5_WITH_RSA_ENCRYPTION = 2
    SHA1_WITH_RSA_ENCRYPTION = 3
    SHA224_WITH_RSA_ENCRYPTION = 4
    SHA256_WITH_RSA_ENCRYPTION = 5
    SHA384_WITH_RSA_ENCRYPTION = 6
    SHA512_WITH_RSA_ENCRYPTION = 7
    RSASSA_PSS = 8
    DSA_WITH_SHA1 = 9
    DSA_WITH_SHA224 = 10
    DSA_WITH_SHA256 = 11
    ECDSA_WITH_SHA1 = 12
    ECDSA_WITH_SHA224 = 13
    ECDSA_WITH_SHA256 = 14
    ECDSA_WITH_SHA384 = 15
    ECDSA_WITH_SHA512 = 16
    SHA3_256_WITH_RSA_ENCRYPTION = 17
    SHA3_384_WITH_RSA_ENCRYPTION = 18
    SHA3_512_WITH_RSA_ENCRYPTION = 19


class AttributeType(Enum):
    """The names of the standard attributes, as the specification spells them."""

    UNIQUE_IDENTIFIER = "Unique Identifier"
    NAME = "Name"
    OBJECT_TYPE = "Object Type"
    CRYPTOGRAPHIC_ALGORITHM = "Cryptographic Algorithm"
    CRYPTOGRAPHIC_LENGTH = "Cryptographic Length"
    CRYPTOGRAPHIC_PARAMETERS = "Cryptographic Parameters"
    CRYPTOGRAPHIC_DOMAIN_PARAMETERS = "Cryptographic Domain Parameters"
    CERTIFICATE_TYPE = "Certificate Type"
    CERTIFICATE_LENGTH = "Certificate Length"
    X_509_CERTIFICATE_IDENTIFIER = "X.509 Certificate Identifier"
    X_509_CERTIFICATE_SUBJECT = "X.509 Certificate Subject"
    X_509_CERTIFICATE_ISSUER = "X.509 Certificate Issuer"
    CERTIFICATE_IDENTIFIER = "Certificate Identifier"
    CERTIFICATE_SUBJECT = "Certificate Subject"
    CERTIFICATE_ISSUER = "Certificate Issuer"
    DIGITAL_SIGNATURE_ALGORITHM = "Digital Signature Algorithm"
    DIGEST = "Digest"
    OPERATION_POLICY_NAME = "Operation Policy Name"
    CRYPTOGRAPHIC_USAGE_MASK = "Cryptographic Usage Mask"
    LEASE_TIME = "Lease Time"
    USAGE_LIMITS = "Usage Limits"
    STATE = "State"
    INITIAL_DATE = "Initial Date"
    ACTIVATION_DATE = "Activation Date"
    PROCESS_START_DATE = "Process Start Date"
    PROTECT_STOP_DATE = "Protect Stop Date"
    DEACTIVATION_DATE = "Deactivation Date"
    DESTROY_DATE = "Destroy Date"
    COMPROMISE_OCCURRENCE_DATE = "Compromise Occurrence Date"
    COMPROMISE_DATE = "Compromise Date"
    REVOCATION_REASON = "Revocation Reason"
    ARCHIVE_DATE = "Archive Date"
    OBJECT_GROUP = "Object Group"
    FRESH = "Fresh"
    LINK = "Link"
    APPLICATION_SPECIFIC_INFORMATION = "Application Specific Information"
    CONTACT_INFORMATION = "Contact Information"
    LAST_CHANGE_DATE = "Last Change Date"
    CUSTOM_ATTRIBUTE = "Custom Attribute"
    ALTERNATIVE_NAME = "Alternative Name"
    KEY_VALUE_PRESENT = "Key Value Present"
    KEY_VALUE_LOCATION = "Key Value Location"
    ORIGINAL_CREATION_DATE = "Original Creation Date"
    SENSITIVE = "Sensitive"
    ALWAYS_SENSITIVE = "Always Sensitive"
    EXTRACTABLE = "Extractable"
    NEVER_EXTRACTABLE = "Never Extractable"
