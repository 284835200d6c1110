"""Keys stored before the core's lifecycle was named for keys (schema 0017) keep their lifecycle
state and attributes after migration 0018 renames the columns, and a downgrade gives them back
under the old names (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from alembic.config import Config
from sqlalchemy import MetaData, Table, insert, select

from keymanager.db import Store, make_engine, migrate
from keymanager.db.migrate import MIGRATIONS_DIR
from keymanager.domain.models import KeyState, Lifecycle
from tests.db.test_audit_migration import upgrade

ATTRIBUTES = {"owner": "abc", "names": ["cmk"], "usage_mask": 12}


def test_a_key_keeps_its_lifecycle_and_attributes_across_0018(blank_database_url: str) -> None:
    engine = make_engine(blank_database_url)
    try:
        upgrade(engine, "0017")
        moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        with engine.begin() as connection:
            keys = Table("keys", MetaData(), autoload_with=connection)
            row = {"id": "a" * 32, "name": "billing", "algorithm": "AES_256_GCM", "state": "disabled"}
            row |= {"description": "", "policy": {}, "primary_version": 1, "min_decryption_version": 1}
            row |= {"kmip_lifecycle": "pre_active", "kmip_attributes": ATTRIBUTES}
            connection.execute(insert(keys), [{**row, "created_at": moment, "updated_at": moment}])
        migrate(engine)
        found = Store(engine).get_key("billing")
        assert found is not None and found.state is KeyState.DISABLED
        assert found.lifecycle is Lifecycle.PRE_ACTIVE and found.lifecycle_state is Lifecycle.PRE_ACTIVE
        assert found.attributes == ATTRIBUTES
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0017")
        with engine.connect() as connection:
            keys = Table("keys", MetaData(), autoload_with=connection)
            kept = connection.execute(select(keys.c.kmip_lifecycle, keys.c.kmip_attributes)).one()
        assert tuple(kept) == ("pre_active", ATTRIBUTES)
    finally:
        engine.dispose()
