"""Every ``KM_`` name the repository sets or documents — the test suite, CI, scripts, the Makefile,
the deploy files (the systemd environment file, the compose file, the Kubernetes ConfigMap), the
docs — is a setting, a client's name or a tool's (``cli/km_variables.py``:
``CLIENT_VARIABLES``, ``FOREIGN_PREFIXES``): the service refuses to start on any other (issue 41, item 7)."""

from __future__ import annotations

import re
from pathlib import Path

from keymanager.cli.km_variables import CLIENT_VARIABLES, FOREIGN_PREFIXES, setting_names

ROOT = Path(__file__).resolve().parents[1]
PLACES = ["tests", ".ci", "scripts", "Makefile", "Dockerfile", "deploy", "docs", "README.md", "sdk/README.md"]
NAME = re.compile(r"(?<![A-Za-z0-9_])KM_[A-Z0-9_]*[A-Z0-9_]")
ON_PURPOSE = {
    "tests/cli/test_configuration.py": {"KM_DATABSE_URL", "KM_FROBNICATE"},
    "docs/configuration.md": {"KM_DATABSE_URL"},
    "tests/test_km_variables.py": {"KM_DATABSE_URL", "KM_FROBNICATE"},  # this list
}
"""Names that are no setting, written on purpose (to see them refused, or to show the refusal)."""


def names_in(path: Path) -> set[str]:
    try:
        return set(NAME.findall(path.read_text()))
    except (UnicodeDecodeError, OSError):
        return set()


def test_every_km_name_the_repository_uses_is_a_setting_or_anothers() -> None:
    known = set(setting_names()) | CLIENT_VARIABLES
    unknown: dict[str, set[str]] = {}
    for place in PLACES:
        root = ROOT / place
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            where = str(path.relative_to(ROOT))
            if "__pycache__" in path.parts:
                continue
            for name in names_in(path) - known - ON_PURPOSE.get(where, set()):
                prefix = name.endswith("_") and any(k.startswith(name) for k in known | set(FOREIGN_PREFIXES))
                if not prefix and not name.startswith(FOREIGN_PREFIXES):
                    unknown.setdefault(name, set()).add(where)
    assert not unknown, unknown
    assert names_in(ROOT / "deploy" / "systemd" / "env.example") & known  # the scan reads the deploy files
