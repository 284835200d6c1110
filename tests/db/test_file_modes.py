"""The SQLite file and its directory are private to the service's user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sqlalchemy import text

from keymanager.db import make_engine, migrate


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_sqlite_database_is_created_0600_in_a_0700_directory(tmp_path: Path) -> None:
    database = tmp_path / "var" / "keymanager.db"
    old = os.umask(0)  # even with the loosest umask
    try:
        engine = make_engine(f"sqlite:///{database}")
        migrate(engine)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            beside = [p for p in database.parent.iterdir() if p.name.startswith("keymanager.db-")]
            assert beside  # the WAL and shared-memory files, while a connection is open
            for path in [database, *beside]:
                assert _mode(path) == 0o600, path
        engine.dispose()
    finally:
        os.umask(old)
    assert _mode(database.parent) == 0o700


def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    database = tmp_path / "keymanager.db"
    database.touch(mode=0o640)
    database.chmod(0o640)
    engine = make_engine(f"sqlite:///{database}")
    migrate(engine)
    engine.dispose()
    assert _mode(database) == 0o640
