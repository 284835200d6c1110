"""The KMS API's store (access keys, key renames, rotation periods, tags) on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from keymanager import errors
from keymanager.db import Store
from keymanager.db.kms import KmsStore
from keymanager.domain.access_keys import MAX_PER_PRINCIPAL
from tests.db.test_store import a_key, a_principal, race


@pytest.fixture
def kms_store(engine: Engine) -> KmsStore:
    return KmsStore(engine)


def test_access_keys_round_trip_with_their_principal(store: Store, kms_store: KmsStore) -> None:
    principal = a_principal("billing")
    store.create_principal(principal, "h" * 64)
    version = store.metadata_version()
    created = kms_store.add_access_key(
        "billing", "KMAKAAAAAAAAAAAAAAAA", b"\x00sealed", "km/access-keys/v1.ab/aes", record=None
    )
    assert store.metadata_version() == version + 1
    found = kms_store.access_key("KMAKAAAAAAAAAAAAAAAA")
    assert found is not None and found.principal == principal and found.sealed_secret == b"\x00sealed"
    assert found.wrap_label == "km/access-keys/v1.ab/aes" and found.created_at == created
    assert kms_store.access_keys_of("billing") == [("KMAKAAAAAAAAAAAAAAAA", created)]
    assert kms_store.access_keys_of("nobody") is None
    assert kms_store.access_key("KMAKBBBBBBBBBBBBBBBB") is None


def test_access_key_refusals(store: Store, kms_store: KmsStore) -> None:
    store.create_principal(a_principal("billing"), "h" * 64)
    with pytest.raises(errors.NotFound):
        kms_store.add_access_key("nobody", "KMAKAAAAAAAAAAAAAAAA", b"s", "l", record=None)
    kms_store.add_access_key("billing", "KMAKAAAAAAAAAAAAAAAA", b"s", "l", record=None)
    with pytest.raises(errors.Conflict):
        kms_store.add_access_key("billing", "KMAKAAAAAAAAAAAAAAAA", b"s", "l", record=None)
    for number in range(1, MAX_PER_PRINCIPAL):
        kms_store.add_access_key("billing", f"KMAK{number:016d}", b"s", "l", record=None)
    with pytest.raises(errors.Conflict):
        kms_store.add_access_key("billing", "KMAKZZZZZZZZZZZZZZZZ", b"s", "l", record=None)


def test_revoking_and_deleting_the_principal(store: Store, kms_store: KmsStore) -> None:
    store.create_principal(a_principal("billing"), "h" * 64)
    store.create_principal(a_principal("support"), "i" * 64)
    kms_store.add_access_key("billing", "KMAKAAAAAAAAAAAAAAAA", b"s", "l", record=None)
    kms_store.add_access_key("billing", "KMAKBBBBBBBBBBBBBBBB", b"s", "l", record=None)
    assert not kms_store.delete_access_key("support", "KMAKAAAAAAAAAAAAAAAA", record=None)  # not support's
    version = store.metadata_version()
    assert kms_store.delete_access_key("billing", "KMAKAAAAAAAAAAAAAAAA", record=None)
    assert store.metadata_version() == version + 1 and kms_store.access_key("KMAKAAAAAAAAAAAAAAAA") is None
    assert store.delete_principal("billing")
    assert kms_store.access_key("KMAKBBBBBBBBBBBBBBBB") is None  # went with its principal


def test_rename_keys_moves_a_name_in_one_transaction(store: Store, kms_store: KmsStore) -> None:
    first, second = a_key("billing"), a_key("kms-" + "0" * 32)
    store.create_key(first)
    store.create_key(second)
    store.rename_keys([(first.id, "kms-" + "1" * 32), (second.id, "billing")], record=None)
    moved = store.get_key("billing")
    assert moved is not None and moved.id == second.id
    with pytest.raises(errors.Conflict):
        store.rename_keys([(first.id, "billing")], record=None)
    with pytest.raises(errors.KeyNotFound):
        store.rename_keys([("f" * 32, "other")], record=None)


def test_rotation_period(store: Store, kms_store: KmsStore) -> None:
    key = a_key("billing")
    store.create_key(key)
    store.set_rotation_period(key.id, 90, record=None)
    found = store.get_key(key.id)
    assert found is not None and found.rotation_period_days == 90
    store.set_rotation_period(key.id, None, record=None)
    found = store.get_key(key.id)
    assert found is not None and found.rotation_period_days is None
    with pytest.raises(errors.KeyNotFound):
        store.set_rotation_period("f" * 32, 90, record=None)


def test_tags_are_added_replaced_limited_and_removed(store: Store, kms_store: KmsStore) -> None:
    key, other = a_key("billing"), a_key("other")
    store.create_key(key)
    store.create_key(other)
    assert kms_store.tag_key(key.id, {"b": "1", "a": ""}, limit=3, record=None)
    assert kms_store.tag_key(key.id, {"b": "2", "c": "3"}, limit=3, record=None)
    assert kms_store.tags_of(key.id) == {"a": "", "b": "2", "c": "3"}
    assert list(kms_store.tags_of(key.id)) == ["a", "b", "c"]
    version = store.metadata_version()
    assert not kms_store.tag_key(key.id, {"d": "4"}, limit=3, record=None)  # one too many: nothing written
    assert kms_store.tags_of(key.id) == {"a": "", "b": "2", "c": "3"} and store.metadata_version() == version
    assert kms_store.tags_of(other.id) == {}
    kms_store.untag_key(key.id, ["a", "never"], record=None)
    assert kms_store.tags_of(key.id) == {"b": "2", "c": "3"}
    with pytest.raises(errors.KeyNotFound):
        kms_store.tag_key("f" * 32, {"a": "1"}, limit=3, record=None)


def test_aliases_name_keys_beside_their_names_and_are_unique_across_keys(store: Store) -> None:
    first, second = a_key("billing"), a_key("kms-" + "0" * 32)
    store.create_key(first)
    store.create_key(second)
    assert [(a.name, a.key_id) for a in store.aliases()] == [("billing", first.id), ("kms-" + "0" * 32, second.id)]
    version = store.metadata_version()
    assert store.change_aliases(added=[("invoices", first.id), ("orders", first.id)], limit=2, record=None)
    assert store.metadata_version() == version + 1
    found = store.get_key("invoices")
    assert found is not None and found.id == first.id and found.name == "billing"
    assert [a.name for a in store.aliases([first.id])] == ["billing", "invoices", "orders"]
    # every name, a key's own or an alias, is taken once
    for taken in ("billing", "orders"):
        with pytest.raises(errors.Conflict):
            store.change_aliases(added=[(taken, second.id)], record=None)
        with pytest.raises(errors.Conflict):
            store.create_key(a_key(taken))
    with pytest.raises(errors.Conflict):
        store.rename_keys([(second.id, "invoices")], record=None)
    # the limit counts the aliases besides the name: nothing written past it
    version = store.metadata_version()
    assert not store.change_aliases(added=[("more", first.id)], limit=2, record=None)
    assert store.get_key("more") is None and store.metadata_version() == version


def test_change_aliases_moves_drops_and_renames_in_one_transaction(store: Store) -> None:
    first, second = a_key("billing"), a_key("kms-" + "0" * 32)
    store.create_key(first)
    store.create_key(second)
    store.change_aliases(added=[("invoices", first.id)], record=None)
    # the alias moves to the second key, which takes it as its name; the first keeps its name
    store.change_aliases(removed=["invoices"], renames=[(second.id, "invoices")], record=None)
    moved = store.get_key("invoices")
    assert moved is not None and moved.id == second.id and moved.name == "invoices"
    assert [a.name for a in store.aliases([first.id])] == ["billing"]
    # a key's own name is not an alias to drop; an alias never made is not either
    for missing in ("billing", "never"):
        with pytest.raises(errors.NotFound):
            store.change_aliases(removed=[missing], record=None)
    # a failing step undoes the ones before it
    with pytest.raises(errors.KeyNotFound):
        store.change_aliases(renames=[(first.id, "kms-" + "1" * 32), ("f" * 32, "billing")], record=None)
    kept = store.get_key(first.id)
    assert kept is not None and kept.name == "billing"
    with pytest.raises(errors.KeyNotFound):
        store.change_aliases(added=[("other", "f" * 32)], limit=5, record=None)


def test_one_name_given_at_once_as_an_alias_and_as_a_key_name_is_taken_once(store: Store) -> None:
    """Two transactions at once, one giving ``invoices`` to a key as an alias, the other making a key
    named ``invoices``: the primary key of ``key_aliases`` lets exactly one of them commit."""
    for round_number in range(5):
        name = f"invoices-{round_number}"
        target = a_key(f"billing-{round_number}")
        store.create_key(target)
        outcomes = race(
            lambda name=name, key_id=target.id: store.change_aliases(added=[(name, key_id)], record=None),
            lambda name=name: store.create_key(a_key(name)),
        )
        assert sum(isinstance(o, errors.Conflict) for o in outcomes) == 1, outcomes
        assert [a.name for a in store.aliases() if a.name == name] == [name]
