"""KMIP's names of the key types, read from the table's ``kmip_algorithm`` column, are exactly the
names KMIP gave before the column (written out here, not derived)."""

from keymanager.domain.models import Algorithm
from keymanager.doors.kmip.keys import KMIP_NAMES
from keymanager.doors.kmip.spec import CryptographicAlgorithm

_A = CryptographicAlgorithm
EXPECTED = {
    "AES_256_GCM": (_A.AES, 256),
    "AES_128_GCM": (_A.AES, 128),
    "AES_192_GCM": (_A.AES, 192),
    "AES_128_CBC_PAD": (_A.AES, 128),
    "AES_192_CBC_PAD": (_A.AES, 192),
    "AES_256_CBC_PAD": (_A.AES, 256),
    "HMAC_SHA224": (_A.HMAC_SHA224, 224),
    "HMAC_SHA256": (_A.HMAC_SHA256, 256),
    "HMAC_SHA384": (_A.HMAC_SHA384, 384),
    "HMAC_SHA512": (_A.HMAC_SHA512, 512),
    "RSA_2048": (_A.RSA, 2048),
    "RSA_3072": (_A.RSA, 3072),
    "RSA_4096": (_A.RSA, 4096),
    "ECC_NIST_P256": (_A.EC, 256),
    "ECC_NIST_P384": (_A.EC, 384),
    "ECC_NIST_P521": (_A.EC, 521),
    "ECC_SECG_P256K1": (_A.EC, 256),
    "ECC_NIST_EDWARDS25519": (_A.ED25519, 256),
}


def test_kmip_names_are_the_old_list() -> None:
    assert {Algorithm(k): v for k, v in EXPECTED.items()} == KMIP_NAMES
    assert [a.value for a in KMIP_NAMES] == list(EXPECTED)
