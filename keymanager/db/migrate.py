"""Schema migrations of the metadata store, applied programmatically (no ``alembic.ini``)."""

from __future__ import annotations

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
    with connection_errors_as_unavailable(), engine.begin() as connection:
        _lock(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _POSTGRES_LOCK_ID})
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
