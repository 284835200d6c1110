"""The table of key types is complete, consistent, and the only list of specs and algorithms.

Fails when a spec (an :class:`Algorithm`) lacks a row or a row lacks what its consumers need, when
a mechanism, flag or key type is not PKCS#11's, or when a module of the service spells out its own
list of specs or algorithms instead of asking the table.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pkcs11
import pytest

from keymanager.domain.key_specs import (
    ASYMMETRIC,
    DIGEST_BYTES,
    OAEP_HASHES,
    RAW_MODES,
    SIGNING_HASHES,
    SPECS,
    Algorithm,
    EncryptionAlgorithm,
    KeyAgreementAlgorithm,
    KeyUsage,
    MacAlgorithm,
    ObjectRole,
    SigningAlgorithm,
    choose_usage,
)
from keymanager.domain.policy import Operation
from keymanager.services.key_use import USAGE_OF

PACKAGE = Path(__file__).resolve().parents[2] / "keymanager"
ALGORITHMS_OF_USAGE: dict[KeyUsage, set[str]] = {
    KeyUsage.SIGN_VERIFY: {a.value for a in SigningAlgorithm},
    KeyUsage.ENCRYPT_DECRYPT: {a.value for a in EncryptionAlgorithm},
    KeyUsage.KEY_AGREEMENT: {a.value for a in KeyAgreementAlgorithm},
    KeyUsage.GENERATE_VERIFY_MAC: {a.value for a in MacAlgorithm},
    KeyUsage.TOKENIZE: {"FF1"},
}


def test_every_spec_has_exactly_one_row() -> None:
    assert set(SPECS) == set(Algorithm) and len(SPECS) == len(Algorithm)
    assert all(spec.algorithm is algorithm for algorithm, spec in SPECS.items())
    kms_names = [spec.kms_spec for spec in SPECS.values() if spec.kms_spec is not None]
    assert len(kms_names) == len(set(kms_names))


@pytest.mark.parametrize("algorithm", list(Algorithm))
def test_each_row_is_whole(algorithm: Algorithm) -> None:
    spec = SPECS[algorithm]
    assert spec.usages, "a spec with no usage cannot be created"
    assert spec.default_usage is None or spec.default_usage in spec.usages
    for usage, entry in spec.usages.items():
        assert entry.usage is usage and entry.mechanisms and entry.objects
        assert set(entry.algorithms) <= ALGORITHMS_OF_USAGE[usage], usage
        assert entry.algorithms or spec.mode in RAW_MODES, f"{usage}: only a raw-mode key is named by no algorithm"
        roles = {o.role for o in entry.objects}
        if spec.asymmetric:
            assert roles == {ObjectRole.PRIVATE, ObjectRole.PUBLIC}
            assert (spec.key_bits is None) is (spec.curve is not None)
        else:
            assert not roles & {ObjectRole.PRIVATE, ObjectRole.PUBLIC} and spec.key_bits
        for mechanism in (*entry.mechanisms, *(m for ms in entry.algorithms.values() for m in ms)):
            assert mechanism.name in pkcs11.Mechanism.__members__, mechanism
            assert mechanism.flag is None or mechanism.flag in pkcs11.MechanismFlag.__members__, mechanism
        for obj in entry.objects:
            assert obj.object_class in ("SECRET_KEY", "PRIVATE_KEY", "PUBLIC_KEY")
            assert all(c.value in pkcs11.Attribute.__members__ for c in obj.capabilities)
    assert spec.key_type.value in pkcs11.KeyType.__members__


def test_every_algorithm_is_allowed_by_some_spec_and_has_its_facts() -> None:
    allowed = {a for spec in SPECS.values() for entry in spec.usages.values() for a in entry.algorithms}
    for enumeration in (SigningAlgorithm, EncryptionAlgorithm, KeyAgreementAlgorithm, MacAlgorithm):
        assert {a.value for a in enumeration} <= allowed, enumeration
    assert set(SIGNING_HASHES) == set(SigningAlgorithm)
    assert set(OAEP_HASHES) == set(EncryptionAlgorithm) - {EncryptionAlgorithm.SYMMETRIC_DEFAULT}
    assert set(DIGEST_BYTES) >= set(SIGNING_HASHES.values()) | set(OAEP_HASHES.values())


def test_usages_follow_aws() -> None:
    for spec in ASYMMETRIC:
        if spec.startswith("RSA"):
            with pytest.raises(ValueError, match="needs a usage"):
                choose_usage(spec, None)
        else:
            assert choose_usage(spec, None) is KeyUsage.SIGN_VERIFY
    assert set(SPECS[Algorithm.ECC_SECG_P256K1].usages) == {KeyUsage.SIGN_VERIFY}
    assert set(SPECS[Algorithm.ECC_NIST_EDWARDS25519].usages) == {KeyUsage.SIGN_VERIFY}
    assert SPECS[Algorithm.ECC_NIST_P256].algorithms(KeyUsage.SIGN_VERIFY) == ("ECDSA_SHA_256",)
    assert SPECS[Algorithm.RSA_2048].rsa_oaep_max_plaintext(EncryptionAlgorithm.RSAES_OAEP_SHA_256) == 190


def test_every_operation_names_the_usage_it_needs() -> None:
    assert set(USAGE_OF) == set(Operation)


# -- no consumer keeps its own list --------------------------------------------------------

TABLE = "domain/key_specs"
"""The table's package: its modules are the one place that lists specs and algorithms."""
CHOICES = {
    "config.py": "kms_default_algorithm: the schemes an operator may choose for SYMMETRIC_DEFAULT (config "
    "imports no domain: a choice among SEALING_PREFERENCE)",
    "hsm/capabilities.py": "SEALING_PREFERENCE: which authenticated scheme seals service secrets, best first",
    "services/access_keys.py": "WRAP_KEY_NAMES: the label of the sealing key per scheme",
}
"""Modules that name several specs on purpose: a choice among them, not a fact about them."""
PENDING_KMS = {"domain/kms.py", "doors/kms/crypto.py", "doors/kms/keys.py"}
"""The KMS door's lists, which asym-kms switches to the table (issue 22): remove each once it does."""
NAMES = {
    *(a.value for a in Algorithm),
    *(a.value for a in SigningAlgorithm),
    *(a.value for a in EncryptionAlgorithm if a is not EncryptionAlgorithm.SYMMETRIC_DEFAULT),
    *(a.value for a in MacAlgorithm),
}
"""Names only the table may spell as a value (a single one is a reference; see :func:`_lists`)."""
ENUMS = {"Algorithm", "SigningAlgorithm", "EncryptionAlgorithm", "MacAlgorithm", "KeyAgreementAlgorithm"}


def _members(node: ast.AST) -> list[str]:
    """The spec or algorithm names among the elements of a literal collection."""
    elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
    found = []
    for element in elements:
        if isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name) and element.value.id in ENUMS:
            found.append(element.attr)
        elif isinstance(element, ast.Constant) and element.value in NAMES:
            found.append(str(element.value))
    return found


def _lists(path: Path) -> list[str]:
    """Each literal tuple, list, set or dict of ``path`` that names two or more specs or algorithms."""
    tree = ast.parse(path.read_text())
    return [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {', '.join(_members(node))}"
        for node in ast.walk(tree)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and len(_members(node)) >= 2
    ]


def test_no_module_but_the_table_lists_specs_or_algorithms() -> None:
    skipped = {*CHOICES, *PENDING_KMS}
    found = [
        listed
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in skipped and not path.is_relative_to(PACKAGE / TABLE)
        for listed in _lists(path)
    ]
    assert found == []


def test_the_scan_finds_a_list() -> None:
    """The scan is not blind: the lists it is told to leave are lists, and a new one is caught."""
    for module in CHOICES:
        assert _lists(PACKAGE / module), module
    planted = ast.parse('SIGNERS = ("RSA_2048", Algorithm.ECC_NIST_P256)')
    assert len(_members(planted.body[0].value)) == 2  # type: ignore[attr-defined]


def _decisions(source: str) -> list[str]:
    """Each comparison in ``source`` with a spec or algorithm named (``algorithm is Algorithm.FF1_AES_256``):
    a decision about one row, which belongs in the row (a column, a usage, a mechanism's parameter)."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Compare)
        and any(
            isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ENUMS
            for n in [node.left, *node.comparators]
        )
    ]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_but_the_table_decides_by_a_spec_or_algorithm(path: Path) -> None:
    """Whether a key takes a token format, seals with one AES object, signs prehashed: each is read from
    its row, so a new spec is a row, not a comparison in each module that meets it."""
    if path.is_relative_to(PACKAGE / TABLE) or str(path.relative_to(PACKAGE)) in PENDING_KMS:
        return
    assert _decisions(path.read_text()) == []


def test_the_scan_finds_a_decision() -> None:
    source = "if a is Algorithm.FF1_AES_256 or SigningAlgorithm.ED25519_PH_SHA_512 == b or a is Other.X:\n    pass\n"
    assert [d.split(":")[0] for d in _decisions(source)] == ["line 1", "line 1"]


def test_the_contract_lists_every_spec_and_algorithm() -> None:
    contract = (PACKAGE.parent / "docs" / "contract.md").read_text()
    missing = sorted(name for name in NAMES if f"`{name}`" not in contract)
    assert missing == [], "docs/contract.md: list them in the table of key specs"
