"""What /metrics and the console read, on SQLite and PostgreSQL: keys by state, connections in use,
every key's tags, the database server's facts."""

from __future__ import annotations

from sqlalchemy import Engine

from keymanager.db import Inventory, Store
from keymanager.db.kms import KmsStore
from keymanager.domain.models import KeyState
from tests.db.test_store import a_key


def test_keys_are_counted_by_state(store: Store, engine: Engine) -> None:
    inventory = Inventory(engine)
    assert inventory.keys_by_state() == {}
    first, second, third = a_key("one"), a_key("two"), a_key("three")
    for key in (first, second, third):
        store.create_key(key)
    store.update_key(third.id, state=KeyState.DISABLED)

    assert inventory.keys_by_state() == {"enabled": 2, "disabled": 1}


def test_connections_in_use_follow_checkouts(engine: Engine) -> None:
    inventory = Inventory(engine)
    before = inventory.connections_in_use()
    with engine.connect():
        assert inventory.connections_in_use() == before + 1
    assert inventory.connections_in_use() == before


def test_every_keys_tags_in_one_read(store: Store, engine: Engine) -> None:
    tagged, plain = a_key("tagged"), a_key("plain")
    for key in (tagged, plain):
        store.create_key(key)
    KmsStore(engine).tag_key(tagged.id, {"team": "cards", "cost": "<b>42</b>"}, limit=50, record=None)
    assert Inventory(engine).tags() == {tagged.id: {"cost": "<b>42</b>", "team": "cards"}}


def test_the_database_server_facts(engine: Engine) -> None:
    facts = Inventory(engine).database()
    assert facts["dialect"] == engine.dialect.name and facts["version"]
    if engine.dialect.name == "postgresql":
        assert facts["standby"] is False  # the test server is a primary; a standby would say True
        assert facts["replicas"] == []  # and streams to none
