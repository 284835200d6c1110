"""deploy/README.md's table of the mechanisms each feature needs is the adapter's own table."""

from __future__ import annotations

import re
from pathlib import Path

from keymanager.hsm.capabilities import FEATURES

README = Path(__file__).resolve().parents[2] / "deploy" / "README.md"


def _documented() -> dict[str, list[str]]:
    text = README.read_text()
    block = text.split("<!-- mechanisms:", 1)[1].split("<!-- /mechanisms -->", 1)[0]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = re.findall(r"`(CKM_\w+)`", cells[1])
    return rows


def _needed() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for feature, needs in FEATURES.items():
        names = out.setdefault(feature, [])
        for need in needs:
            if f"CKM_{need.mechanism.name}" not in names:
                names.append(f"CKM_{need.mechanism.name}")
    return out


def test_every_feature_and_mechanism_is_documented_as_the_adapter_needs_it() -> None:
    assert _documented() == _needed()
