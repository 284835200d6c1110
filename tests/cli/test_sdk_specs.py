"""``sdk/keymanager_sdk/_spec_names.py`` is made from the table of key types, and kmctl offers it all."""

from __future__ import annotations

from pathlib import Path

from keymanager_sdk import _spec_names
from keymanager_sdk.cli._parser import parser as kmctl_parser

from keymanager.cli.sdk_specs import main, module_text
from keymanager.domain.key_specs import ASYMMETRIC, SPECS, SigningAlgorithm

MODULE = Path(__file__).resolve().parents[2] / "sdk" / "keymanager_sdk" / "_spec_names.py"


def test_the_sdk_module_is_the_tables() -> None:
    stale = "stale: run .venv/bin/python -m keymanager.cli.sdk_specs --update sdk/keymanager_sdk/_spec_names.py"
    assert MODULE.read_text() == module_text(), stale
    assert tuple(a.value for a in SPECS) == _spec_names.KEY_SPECS
    assert tuple(a.value for a in ASYMMETRIC) == _spec_names.KEY_PAIR_SPECS
    assert tuple(a.value for a in SigningAlgorithm) == _spec_names.SIGNING_ALGORITHMS


def test_kmctl_offers_every_spec_of_the_table() -> None:
    parser = kmctl_parser()
    for algorithm in SPECS:  # AES_128_GCM and AES_192_GCM were missing once, and no test noticed
        parsed = parser.parse_args(["keys", "create", "k", "--algorithm", algorithm.value])
        assert parsed.algorithm == algorithm.value


def test_the_command_updates_a_file(tmp_path: Path) -> None:
    target = tmp_path / "_spec_names.py"
    assert main(["--update", str(target)]) == 0
    assert target.read_text() == module_text()
    assert main(["--bad"]) == 2
