"""The one table of key types (:data:`SPECS`), and what its consumers ask of it.

A row per spec, made by the builders of :mod:`keymanager.domain.key_specs.rows`, in table order;
the lookups (a spec by name or by its AWS ``KeySpec``, the specs of a usage, the usage of a new
key) and the lists derived from the rows (symmetric and asymmetric specs, curve identifiers, the
binary formats' algorithm ids, the MAC specs).
"""

from __future__ import annotations

from collections.abc import Mapping

from keymanager.domain.key_specs.algorithms import Algorithm, KeyUsage, MacAlgorithm, SigningAlgorithm
from keymanager.domain.key_specs.columns import KeySpec
from keymanager.domain.key_specs.rows import ec_row, ed25519_row, hmac_row, rsa_row, symmetric_rows

SPECS: Mapping[Algorithm, KeySpec] = {
    spec.algorithm: spec
    for spec in (
        *symmetric_rows(),
        hmac_row(Algorithm.HMAC_SHA224, "HMAC_224", MacAlgorithm.HMAC_SHA_224, 224),
        hmac_row(Algorithm.HMAC_SHA256, "HMAC_256", MacAlgorithm.HMAC_SHA_256, 256),
        hmac_row(Algorithm.HMAC_SHA384, "HMAC_384", MacAlgorithm.HMAC_SHA_384, 384),
        hmac_row(Algorithm.HMAC_SHA512, "HMAC_512", MacAlgorithm.HMAC_SHA_512, 512),
        rsa_row(2048),
        rsa_row(3072),
        rsa_row(4096),
        ec_row(
            Algorithm.ECC_NIST_P256,
            "secp256r1",
            "1.2.840.10045.3.1.7",
            256,
            SigningAlgorithm.ECDSA_SHA_256,
            agreement=True,
            transit_type="ecdsa-p256",
        ),
        ec_row(
            Algorithm.ECC_NIST_P384,
            "secp384r1",
            "1.3.132.0.34",
            384,
            SigningAlgorithm.ECDSA_SHA_384,
            agreement=True,
            transit_type="ecdsa-p384",
        ),
        ec_row(
            Algorithm.ECC_NIST_P521,
            "secp521r1",
            "1.3.132.0.35",
            521,
            SigningAlgorithm.ECDSA_SHA_512,
            agreement=True,
            transit_type="ecdsa-p521",
        ),
        ec_row(
            Algorithm.ECC_SECG_P256K1, "secp256k1", "1.3.132.0.10", 256, SigningAlgorithm.ECDSA_SHA_256, agreement=False
        ),
        ed25519_row(),
    )
}
"""Every key spec, by native name: the one table (a spec without a row cannot be created)."""


def spec_of(algorithm: Algorithm) -> KeySpec:
    """The row of ``algorithm``."""
    return SPECS[algorithm]


def specs_for(usage: KeyUsage) -> tuple[Algorithm, ...]:
    """The specs that allow ``usage``, in table order."""
    return tuple(a for a, spec in SPECS.items() if spec.allowed(usage))


def xks_algorithm() -> Algorithm:
    """The spec of the XKS door's keys (the row with an XKS ``keySpec``): what its health check's test key is."""
    return next(algorithm for algorithm, spec in SPECS.items() if spec.xks_spec is not None)


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
HMAC_KEY_BITS: Mapping[Algorithm, int] = {
    a: spec.key_bits for a, spec in SPECS.items() if KeyUsage.GENERATE_VERIFY_MAC in spec.usages and spec.key_bits
}
"""The MAC specs (keys that only compute MACs) and the size of their secrets: as long as the digest."""
