"""Throwaway PostgreSQL databases for tests, on the server named by ``KM_TEST_POSTGRES_URL``.

The server is required: when it cannot be reached these functions raise, so
tests that need it error instead of being skipped.

A test that needs a migrated database copies a template (``create_database(template=...)``, the
session fixture ``postgres_template`` of ``tests/conftest.py``: migrated once per test process)
instead of running every migration again; PostgreSQL copies it in a few milliseconds.
"""

from __future__ import annotations

import os
import re
import secrets

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

DEFAULT_SERVER_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
_TEST_DATABASE = re.compile(r"km_test_[0-9a-f]{16}")


def create_database(template: str | None = None) -> str:
    """Create a database ``km_test_<random hex>``, empty or a copy of the database ``template`` (a
    URL from this function, nobody connected to it); its SQLAlchemy URL (password included)."""
    server = _server_url()
    name = f"km_test_{secrets.token_hex(8)}"
    copied = ""
    if template is not None:
        source = make_url(template).database or ""
        if not _TEST_DATABASE.fullmatch(source):
            raise ValueError(f"refusing to copy {source!r}: not a test database")
        copied = f' TEMPLATE "{source}"'
    _run_on_server(server, f'CREATE DATABASE "{name}"{copied}')
    return server.set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    """Drop a database made by :func:`create_database`, ending its open connections first."""
    name = make_url(url).database or ""
    if not _TEST_DATABASE.fullmatch(name):
        raise ValueError(f"refusing to drop {name!r}: not a test database")
    server = _server_url()
    _run_on_server(
        server,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name AND pid <> pg_backend_pid()",
        name=name,
    )
    _run_on_server(server, f'DROP DATABASE IF EXISTS "{name}"')


def _server_url() -> URL:
    return make_url(os.environ.get("KM_TEST_POSTGRES_URL", DEFAULT_SERVER_URL))


def _run_on_server(server: URL, sql: str, **params: str) -> None:
    engine = create_engine(server, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(text(sql), params)
    finally:
        engine.dispose()
