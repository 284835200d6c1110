"""Schema migrations of the metadata store, applied programmatically (no ``alembic.ini``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, text

from keymanager.db.engine import connection_errors_as_unavailable

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_POSTGRES_LOCK_ID = 0x6B6D_6462  # "kmdb": serialises replicas migrating at once


def migrate(engine: Engine) -> None:
    """Bring the database behind ``engine`` to the newest schema revision.

    Idempotent: a database already at the newest revision is left alone.
    Raises ``DatabaseUnavailable`` when the database cannot be reached.
    Replicas starting together are serialised (an advisory lock on PostgreSQL,
    an immediate write transaction on SQLite), so each revision runs once.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    with (
        connection_errors_as_unavailable(),
        engine.connect() as connection,
        _foreign_keys_off(connection),
        connection.begin(),
    ):
        _lock(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        _check_foreign_keys(connection)


@contextmanager
def _foreign_keys_off(connection: Connection) -> Iterator[None]:
    """On SQLite, foreign keys unenforced while the migrations run, on this connection only: a
    migration that alters a table recreates it (SQLite's batch mode), and dropping the old copy
    would otherwise cascade to every row referring to it (a key's aliases, its versions)."""
    if connection.dialect.name != "sqlite":
        yield
        return
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction: before BEGIN
    connection.commit()
    try:
        yield
    finally:
        connection.rollback()  # whatever a failed migration left open, before the pragma can apply
        connection.exec_driver_sql("PRAGMA foreign_keys=ON")
        connection.commit()


def _check_foreign_keys(connection: Connection) -> None:
    """Refuse (roll back) a migration that left a row referring to nothing (SQLite)."""
    if connection.dialect.name == "sqlite" and connection.exec_driver_sql("PRAGMA foreign_key_check").first():
        raise RuntimeError("a migration left rows whose foreign keys refer to nothing; nothing was changed")


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _POSTGRES_LOCK_ID})
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
