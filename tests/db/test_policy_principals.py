"""Policies by principal id in the store, and the migration that converts stored names to ids."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, select

from keymanager.db import Store, make_engine, migrate
from keymanager.db.migrate import MIGRATIONS_DIR
from keymanager.db.models import KeyRow, PrincipalRow
from keymanager.domain.models import Key
from keymanager.domain.policy import Operation, Policy
from tests.db.test_store import a_key, a_principal

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def test_principals_by_name_and_names_by_id(store: Store) -> None:
    billing, support = a_principal("billing"), a_principal("support")
    store.create_principal(billing, "h1")
    store.create_principal(support, "h2")
    found = store.principals_by_name({"billing", "support", "gone"})
    assert sorted(p.id for p in found) == sorted([billing.id, support.id])
    assert store.principal_names({billing.id, "0" * 32}) == {billing.id: "billing"}
    assert store.principals_by_name(set()) == [] and store.principal_names(set()) == {}


def test_deleting_a_principal_removes_it_from_every_policy(store: Store) -> None:
    billing, support = a_principal("billing"), a_principal("support")
    store.create_principal(billing, "h1")
    store.create_principal(support, "h2")
    policy = Policy.from_dict(
        {"encrypt": [billing.id], "decrypt": [billing.id, support.id], "not_after": "2030-01-01T00:00:00+00:00"}
    )
    store.create_key(replace_policy(a_key("cards"), policy))
    store.create_key(replace_policy(a_key("other"), Policy.from_dict({"mac": [support.id]})))
    before = store.metadata_version()
    assert store.delete_principal("billing")
    cards = store.get_key("cards")
    assert cards is not None
    assert cards.policy.principals() == {support.id}
    assert not cards.policy.allows(Operation.ENCRYPT, billing.id)
    assert cards.policy.not_after == policy.not_after
    other = store.get_key("other")
    assert other is not None and other.policy.principals() == {support.id}
    assert store.metadata_version() == before + 1
    assert not store.delete_principal("billing")


def replace_policy(key: Key, policy: Policy) -> Key:
    return replace(key, policy=policy)


def _alembic(engine: Engine, action: str, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        getattr(command, action)(config, revision)


def _principal_row(name: str, role: str) -> dict[str, Any]:
    return {"id": f"{name:x<32}"[:32], "name": name, "role": role, "token_hash": f"hash-{name}", "created_at": T0}


def _key_row(name: str, policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"{name:k<32}"[:32],
        "name": name,
        "algorithm": "AES_256_CBC_HMAC_SHA256",
        "state": "enabled",
        "description": "",
        "policy": policy,
        "primary_version": 1,
        "min_decryption_version": 1,
        "created_at": T0,
        "updated_at": T0,
    }


def _policies(engine: Engine) -> dict[str, dict[str, Any]]:
    with engine.connect() as connection:
        return dict(connection.execute(select(KeyRow.name, KeyRow.policy)).tuples().all())


def test_migration_turns_policy_names_into_ids_and_drops_the_rest(blank_database_url: str) -> None:
    engine = make_engine(blank_database_url)
    try:
        _alembic(engine, "upgrade", "0003")
        principals = [_principal_row(n, r) for n, r in (("billing", "app"), ("ops", "admin"), ("eve", "auditor"))]
        named = {
            "encrypt": ["billing", "ops"],
            "decrypt": ["billing", "gone", "eve"],
            "generate_data_key": [],
            "reencrypt": ["gone"],
            "mac": [],
            "not_before": None,
            "not_after": "2030-01-01T00:00:00+00:00",
        }
        with engine.begin() as connection:
            connection.execute(PrincipalRow.__table__.insert(), principals)
            connection.execute(KeyRow.__table__.insert(), [_key_row("cards", named), _key_row("empty", {})])
        migrate(engine)
        billing, ops = principals[0]["id"], principals[1]["id"]
        policies = _policies(engine)
        assert policies["cards"] == {
            **named,
            "encrypt": sorted([billing, ops]),
            "decrypt": [billing],
            "reencrypt": [],
        }
        assert policies["empty"] == {}
        stored = Store(engine).get_key("cards")
        assert stored is not None and stored.policy.allows(Operation.DECRYPT, billing, now=T0)
        # Down again: ids become names (the dropped names stay dropped).
        _alembic(engine, "downgrade", "0003")
        assert _policies(engine)["cards"] == {
            **named,
            "encrypt": ["billing", "ops"],
            "decrypt": ["billing"],
            "reencrypt": [],
        }
    finally:
        engine.dispose()
