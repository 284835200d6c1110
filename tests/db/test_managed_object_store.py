"""Migration 0014 on SQLite and PostgreSQL: a principal's create_keys, a key's KMIP state,
exportability and attributes, and the registered objects of ``db/managed_objects.py`` (compare-and-set)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from keymanager import errors
from keymanager.db import Store
from keymanager.db.managed_objects import ManagedObjectStore
from keymanager.domain.credentials import new_id
from keymanager.domain.managed_objects import ManagedObject
from keymanager.domain.models import KeyState, Lifecycle, Principal, Role
from keymanager.domain.policy import Operation, Policy
from tests.db.test_store import T0, a_key


def an_object(owner: str) -> ManagedObject:
    return ManagedObject(
        id=new_id(),
        object_type="SECRET_DATA",
        state=Lifecycle.PRE_ACTIVE,
        owner_id=owner,
        policy=Policy.from_dict(Policy(grants={Operation.GET_KEY_MATERIAL: frozenset({owner})}).to_dict()),
        attributes={"names": ["local key"], "value_type": 2, "custom": {"x-purpose": ["text", "mongo"]}},
        sealed=b"\x00sealed\xff" * 12,
        seal_label="km/kmip-objects/v1/aes",
        created_at=T0,
        updated_at=T0,
    )


def test_a_principal_keeps_its_create_keys_flag(store: Store) -> None:
    principal = Principal(id=new_id(), name="mongo", role=Role.APP, created_at=T0, create_keys=True)
    store.create_principal(principal, "hash-of-mongo")
    assert store.principal_by_name("mongo") == principal
    assert store.principal_by_name("mongo").create_keys  # type: ignore[union-attr]


def test_a_key_keeps_its_lifecycle_state_exportability_and_attributes(store: Store) -> None:
    key = replace(
        a_key("kmip-key"),
        state=KeyState.DISABLED,
        lifecycle=Lifecycle.PRE_ACTIVE,
        exportable=True,
        attributes={"owner": "abc", "names": ["cmk"], "usage_mask": 12},
    )
    store.create_key(key)
    found = store.get_key(key.id)
    assert found is not None and found.lifecycle_state is Lifecycle.PRE_ACTIVE and found.exportable
    assert found.attributes == {"owner": "abc", "names": ["cmk"], "usage_mask": 12}
    changed = store.update_key(
        key.id, state=KeyState.ENABLED, lifecycle=Lifecycle.ACTIVE, attributes={"names": ["renamed"]}
    )
    assert changed.lifecycle_state is Lifecycle.ACTIVE and changed.attributes == {"names": ["renamed"]}
    disabled = store.update_key(key.id, state=KeyState.DISABLED)
    assert disabled.lifecycle_state is Lifecycle.DEACTIVATED  # once active, a disabled key is deactivated


def test_a_native_key_is_active_in_kmip_words(store: Store) -> None:
    key = a_key("native")
    store.create_key(key)
    found = store.get_key(key.id)
    assert found is not None and found.lifecycle_state is Lifecycle.ACTIVE and not found.exportable
    assert found.attributes == {}


def test_a_registered_object_is_stored_and_changed_if_unchanged(engine: Engine) -> None:
    objects = ManagedObjectStore(engine)
    owner = new_id()
    made = an_object(owner)
    objects.add(made, record=None)
    assert objects.get(made.id) == made
    assert [o.id for o in objects.all()] == [made.id]
    objects.change(made, state=Lifecycle.ACTIVE, attributes={**made.attributes, "names": []}, record=None)
    active = objects.get(made.id)
    assert active is not None and active.state is Lifecycle.ACTIVE and active.attributes["names"] == []
    with pytest.raises(errors.PreconditionFailed):
        objects.change(made, state=Lifecycle.DEACTIVATED, record=None)  # read before the change above
    later = replace(active, updated_at=active.updated_at)
    changed = objects.change(later, state=Lifecycle.DESTROYED, destroy=True, record=None)
    destroyed = objects.get(made.id)
    assert destroyed is not None and destroyed.sealed is None and destroyed.state is Lifecycle.DESTROYED
    assert changed == destroyed  # the object as changed, without reading it back
    assert objects.get(new_id()) is None


def test_objects_are_listed_newest_first(engine: Engine) -> None:
    objects = ManagedObjectStore(engine)
    older = an_object("a")
    newer = replace(an_object("b"), created_at=datetime.now(UTC) + timedelta(seconds=1))
    objects.add(older, record=None)
    objects.add(newer, record=None)
    assert [o.id for o in objects.all()] == [newer.id, older.id]
