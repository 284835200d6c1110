"""Fixtures: a migrated, empty store on SQLite (a file per test) and on PostgreSQL.

PostgreSQL uses one throwaway database per test session, migrated once and
emptied before each test. An unreachable server makes these tests error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from keymanager.db import Store, make_engine, migrate
from keymanager.domain.audit import GENESIS_HASH
from tests.support.postgres import create_database, drop_database

BACKENDS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(scope="session")
def postgres_engine() -> Iterator[Engine]:
    url = create_database()
    engine = make_engine(url)
    try:
        migrate(engine)
        yield engine
    finally:
        engine.dispose()
        drop_database(url)


@pytest.fixture(params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A migrated engine holding no rows."""
    if request.param == "postgresql":
        engine: Engine = request.getfixturevalue("postgres_engine")
        with engine.begin() as connection:
            tables = "access_keys, key_tags, key_aliases, key_versions, keys, principals, audit_records, kmip_objects"
            tables += ", transit_keys, approle_tokens, approle_credentials, credentials"
            connection.execute(text(f"TRUNCATE {tables}"))
            connection.execute(text("DELETE FROM audit_chains WHERE id <> 1"))
            connection.execute(text("ALTER SEQUENCE audit_position RESTART"))
            connection.execute(text(f"UPDATE audit_chains SET last_seq = 0, last_hash = '{GENESIS_HASH}'"))
        yield engine
        return
    engine = make_engine(f"sqlite:///{tmp_path / 'var' / 'keymanager.db'}")
    migrate(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def store(engine: Engine) -> Store:
    return Store(engine)


@pytest.fixture(params=BACKENDS)
def blank_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a database with no schema at all."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'blank.db'}"
        return
    url = create_database()
    yield url
    drop_database(url)
