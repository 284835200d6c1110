"""The key specs, usages and algorithms of the service's table of key types.

Generated from ``keymanager/domain/key_specs/`` by ``python -m keymanager.cli.sdk_specs``: do not
edit (a test of the service fails while this differs from its table). kmctl's choices read these.
"""

KEY_SPECS = (
    "AES_256_CBC_HMAC_SHA256",
    "AES_256_GCM",
    "FF1_AES_256",
    "AES_128_GCM",
    "AES_192_GCM",
    "AES_128_CBC_PAD",
    "AES_192_CBC_PAD",
    "AES_256_CBC_PAD",
    "HMAC_SHA224",
    "HMAC_SHA256",
    "HMAC_SHA384",
    "HMAC_SHA512",
    "RSA_2048",
    "RSA_3072",
    "RSA_4096",
    "ECC_NIST_P256",
    "ECC_NIST_P384",
    "ECC_NIST_P521",
    "ECC_SECG_P256K1",
    "ECC_NIST_EDWARDS25519",
)
"""Every key spec (a key's ``algorithm``), in the table's order."""

SYMMETRIC_SPECS = (
    "AES_256_CBC_HMAC_SHA256",
    "AES_256_GCM",
    "FF1_AES_256",
    "AES_128_GCM",
    "AES_192_GCM",
    "AES_128_CBC_PAD",
    "AES_192_CBC_PAD",
    "AES_256_CBC_PAD",
    "HMAC_SHA224",
    "HMAC_SHA256",
    "HMAC_SHA384",
    "HMAC_SHA512",
)
"""The specs with secret keys only."""

KEY_PAIR_SPECS = (
    "RSA_2048",
    "RSA_3072",
    "RSA_4096",
    "ECC_NIST_P256",
    "ECC_NIST_P384",
    "ECC_NIST_P521",
    "ECC_SECG_P256K1",
    "ECC_NIST_EDWARDS25519",
)
"""The asymmetric specs (``generate_data_key_pair``'s too)."""

USAGES = (
    "ENCRYPT_DECRYPT",
    "SIGN_VERIFY",
    "GENERATE_VERIFY_MAC",
    "KEY_AGREEMENT",
    "TOKENIZE",
)
"""The key usages some spec allows."""

SIGNING_ALGORITHMS = (
    "RSASSA_PSS_SHA_256",
    "RSASSA_PSS_SHA_384",
    "RSASSA_PSS_SHA_512",
    "RSASSA_PKCS1_V1_5_SHA_256",
    "RSASSA_PKCS1_V1_5_SHA_384",
    "RSASSA_PKCS1_V1_5_SHA_512",
    "ECDSA_SHA_256",
    "ECDSA_SHA_384",
    "ECDSA_SHA_512",
    "ED25519_SHA_512",
    "ED25519_PH_SHA_512",
)
"""AWS ``SigningAlgorithmSpec``s."""

ENCRYPTION_ALGORITHMS = (
    "SYMMETRIC_DEFAULT",
    "RSAES_OAEP_SHA_1",
    "RSAES_OAEP_SHA_256",
)
"""AWS ``EncryptionAlgorithmSpec``s."""

MAC_ALGORITHMS = (
    "HMAC_SHA_224",
    "HMAC_SHA_256",
    "HMAC_SHA_384",
    "HMAC_SHA_512",
)
"""AWS ``MacAlgorithmSpec``s."""

KEY_AGREEMENT_ALGORITHMS = ("ECDH",)
"""AWS ``KeyAgreementAlgorithmSpec``s."""
