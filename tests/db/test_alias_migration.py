"""Keys stored before several aliases per key (schema 0010) keep answering to their names after
migration 0012: each name becomes the key's row in ``key_aliases`` (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import MetaData, Table, insert

from keymanager import errors
from keymanager.db import Store, make_engine, migrate
from tests.db.test_audit_migration import upgrade
from tests.db.test_store import a_key


def test_names_of_keys_made_before_0012_are_their_aliases(blank_database_url: str) -> None:
    engine = make_engine(blank_database_url)
    try:
        upgrade(engine, "0010")
        moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        with engine.begin() as connection:
            keys = Table("keys", MetaData(), autoload_with=connection)
            for key_id, name in (("a" * 32, "billing"), ("b" * 32, "kms-" + "0" * 32)):
                row = {"id": key_id, "name": name, "algorithm": "AES_256_GCM", "state": "enabled", "description": ""}
                row |= {"policy": {}, "primary_version": 1, "min_decryption_version": 1}
                connection.execute(insert(keys), [{**row, "created_at": moment, "updated_at": moment}])
        migrate(engine)  # on SQLite 0014 recreates `keys`: its aliases must not go with the old copy
        if engine.dialect.name == "sqlite":
            with engine.connect() as connection:  # and the pooled connection enforces foreign keys again
                assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        store = Store(engine)
        assert [(a.name, a.key_id, a.created_at) for a in store.aliases()] == [
            ("billing", "a" * 32, moment),
            ("kms-" + "0" * 32, "b" * 32, moment),
        ]
        with pytest.raises(errors.Conflict):
            store.change_aliases(added=[("billing", "b" * 32)], record=None)
        with pytest.raises(errors.Conflict):
            store.create_key(a_key("billing"))
        store.change_aliases(added=[("invoices", "a" * 32)], record=None)
        found = store.get_key("invoices")
        assert found is not None and found.id == "a" * 32
    finally:
        engine.dispose()
