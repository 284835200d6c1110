"""``keymanager init`` and a serving server leave the database and the token directory private."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.security.conftest import Server


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_database_and_token_directory_are_private(server: Server) -> None:
    var = server.var_dir
    assert _mode(var) == 0o700
    databases = [p for p in var.iterdir() if p.name.startswith("keymanager.db")]
    assert var / "keymanager.db" in databases
    for path in databases:  # with the WAL and shared-memory files of the running workers
        assert _mode(path) == 0o600, path
    tokens = var / "softhsm" / "tokens"
    assert _mode(var / "softhsm") == 0o700
    assert _mode(tokens) == 0o700
    inside = list(tokens.rglob("*"))
    assert inside
    for path in inside:
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
