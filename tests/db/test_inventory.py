"""The counts /metrics reads, on SQLite and PostgreSQL: keys by state, connections in use."""

from __future__ import annotations

from sqlalchemy import Engine

from keymanager.db import Inventory, Store
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
