"""Alembic environment: runs migrations on the connection handed over by ``migrate()``.

``config.attributes["connection"]`` carries the connection; without one (the
``alembic`` command line, for authoring a revision) an engine is made from the
``sqlalchemy.url`` option.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from keymanager.db.engine import make_engine
from keymanager.db.models import Base


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("pass a connection in config.attributes or set sqlalchemy.url")
    engine = make_engine(url)
    try:
        with engine.begin() as own_connection:
            _run(own_connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
_run_online()
