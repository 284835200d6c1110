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

The table's parts, each its own module; consumers import the names from here:

- :mod:`~keymanager.domain.key_specs.algorithms`: the names (specs, usages, AWS's algorithms) and
  the algorithms' own facts (hashes, digest lengths);
- :mod:`~keymanager.domain.key_specs.columns`: what a row holds (:class:`KeySpec` and its parts);
- :mod:`~keymanager.domain.key_specs.rows`: the builders of the rows, one per family of specs;
- :mod:`~keymanager.domain.key_specs.table`: the rows (:data:`SPECS`), the lookups and the lists
  derived from them.

How to add a spec: ``docs/architecture.md`` ("How to add a key spec").
"""

from __future__ import annotations

from keymanager.domain.key_specs.algorithms import (
    DIGEST_BYTES,
    MAC_HASHES,
    MAX_RAW_MESSAGE_BYTES,
    OAEP_HASHES,
    SIGNING_HASHES,
    SIGNS_RAW_ONLY,
    VERIFIED_IN_HSM,
    Algorithm,
    EncryptionAlgorithm,
    Hash,
    KeyAgreementAlgorithm,
    KeyUsage,
    MacAlgorithm,
    MessageType,
    SigningAlgorithm,
    digest_bytes,
)
from keymanager.domain.key_specs.columns import (
    ONE_AES_OBJECT,
    RAW_MODES,
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
from keymanager.domain.key_specs.table import (
    ASYMMETRIC,
    CURVE_OIDS,
    DATA_KEY_PAIR_SPECS,
    FORMAT_IDS,
    HMAC_KEY_BITS,
    SPECS,
    SYMMETRIC,
    by_kms_spec,
    choose_usage,
    implied_usage,
    spec_of,
    specs_for,
    xks_algorithm,
)

__all__ = [
    "ASYMMETRIC",
    "CURVE_OIDS",
    "DATA_KEY_PAIR_SPECS",
    "DIGEST_BYTES",
    "FORMAT_IDS",
    "HMAC_KEY_BITS",
    "MAC_HASHES",
    "MAX_RAW_MESSAGE_BYTES",
    "OAEP_HASHES",
    "ONE_AES_OBJECT",
    "RAW_MODES",
    "SIGNING_HASHES",
    "SIGNS_RAW_ONLY",
    "SPECS",
    "SYMMETRIC",
    "VERIFIED_IN_HSM",
    "Algorithm",
    "BlockMode",
    "Capability",
    "EncryptionAlgorithm",
    "Hash",
    "HsmKeyType",
    "HsmObject",
    "KeyAgreementAlgorithm",
    "KeySpec",
    "KeyUsage",
    "MacAlgorithm",
    "Mechanism",
    "MessageType",
    "ObjectRole",
    "PublicKeyForm",
    "SigningAlgorithm",
    "Usage",
    "by_kms_spec",
    "choose_usage",
    "digest_bytes",
    "implied_usage",
    "spec_of",
    "specs_for",
    "xks_algorithm",
]
