"""Key reads through the snapshot stay honest, key lists name principals, failed creations leave no HSM objects."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from keymanager.domain.audit import AuditEntry, AuditQuery, Outcome
from keymanager.domain.models import KeyState, Origin, Principal, Role
from keymanager.domain.policy import Operation, Policy
from keymanager.errors import DatabaseUnavailable, Forbidden, KeyNotFound
from keymanager.services.container import Services
from keymanager.services.key_creation import NewKey
from keymanager.services.keys import ShownKey, Unnameable
from keymanager.services.snapshot import Snapshot, run_validated


def read(services: Services, principal: Principal, ref: str) -> ShownKey:
    """``KeyService.read`` as the route runs it: validated, with its audit record."""

    async def attempt(snapshot: Snapshot) -> ShownKey:
        return await services.keys.read(snapshot, principal, ref)

    def entry(_: ShownKey) -> AuditEntry:
        return AuditEntry(time=datetime.now(UTC), action="key.read", outcome=Outcome.OK, status=200)

    return asyncio.run(run_validated(services.cache, services.audit_log, attempt, entry))


def reads_recorded(services: Services) -> int:
    return len(services.audit_reader.query(AuditQuery(action="key.read", limit=100)))


@pytest.fixture
def billing(services: Services) -> Principal:
    return services.principals.create("billing", Role.APP).principal


@pytest.fixture
def admin(services: Services) -> Principal:
    return services.principals.create("admin", Role.ADMIN).principal


def test_a_read_after_a_change_behind_the_cache_shows_the_change(services: Services, admin: Principal) -> None:
    key = services.keys.create(NewKey("cards", description="before"))
    assert read(services, admin, "cards").key.description == "before"  # now cached
    services.store.update_key(key.id, description="after")  # as another replica would

    assert read(services, admin, "cards").key.description == "after"
    assert read(services, admin, key.id).key.description == "after"
    assert reads_recorded(services) == 3  # the stale attempt left no record


def test_a_refusal_from_a_stale_cache_is_checked_against_the_database(
    services: Services, admin: Principal, billing: Principal
) -> None:
    key = services.keys.create(NewKey("cards"))
    with pytest.raises(Forbidden):
        read(services, billing, "cards")  # the key is cached, its policy naming nobody
    services.store.update_key(key.id, policy=Policy({Operation.ENCRYPT: frozenset({billing.id})}))

    shown = read(services, billing, "cards")
    assert shown.policy.to_dict()["encrypt"] == ["billing"]  # by name, not by id
    assert shown.key.policy.to_dict()["encrypt"] == [billing.id]
    assert reads_recorded(services) == 1


def test_an_unknown_key_is_not_found_and_nothing_is_remembered(services: Services, admin: Principal) -> None:
    with pytest.raises(KeyNotFound):
        read(services, admin, "nothing")
    assert services.cache.key_id("nothing") is None


def test_the_list_shows_a_principal_the_keys_naming_it_with_names(
    services: Services, admin: Principal, billing: Principal
) -> None:
    services.keys.create(NewKey("cards", policy=Policy({Operation.DECRYPT: frozenset({"billing"})})))
    services.keys.create(NewKey("ssn"))

    mine = asyncio.run(services.keys.listed(billing))
    every = asyncio.run(services.keys.listed(admin))

    assert [s.key.name for s in mine] == ["cards"]
    assert mine[0].policy.to_dict()["decrypt"] == ["billing"]
    assert [s.key.name for s in every] == ["cards", "ssn"]
    assert every[1].policy.principals() == every[1].key.policy.principals() == frozenset()


def test_a_creation_that_cannot_be_recorded_leaves_no_hsm_objects(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    generate = services.hsm.generate_version

    def recording(*args: object) -> object:
        objects = generate(*args)  # type: ignore[arg-type]
        made.extend(label for label in (objects.enc_label, objects.mac_label) if label)
        return objects

    def refuse(*_: object, **__: object) -> None:
        raise DatabaseUnavailable()

    monkeypatch.setattr(services.hsm, "generate_version", recording)
    monkeypatch.setattr(services.store, "create_key", refuse)
    with pytest.raises(DatabaseUnavailable):
        services.keys.create(NewKey("cards"))

    assert made
    assert not set(made) & set(services.hsm.find_labels_afresh("km/"))


def test_an_imported_key_starts_pending_without_versions(services: Services) -> None:
    key = services.keys.create(NewKey("byok", origin=Origin.EXTERNAL))

    assert (key.state, key.primary_version, key.versions) == (KeyState.PENDING_IMPORT, 0, {})
    stored = services.keys.find("byok")
    assert (stored.id, stored.state, stored.primary_version, stored.versions) == (
        key.id,
        KeyState.PENDING_IMPORT,
        0,
        {},
    )


def test_principal_names_are_read_once_per_process(
    services: Services, admin: Principal, billing: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    services.keys.create(NewKey("cards", policy=Policy({Operation.ENCRYPT: frozenset({"billing", "admin"})})))
    asked: list[frozenset[str]] = []
    names = services.store.principal_names
    monkeypatch.setattr(services.store, "principal_names", lambda ids: asked.append(frozenset(ids)) or names(ids))

    first = read(services, admin, "cards")
    again = read(services, billing, "cards")
    listed = asyncio.run(services.keys.listed(admin))

    assert asked == [frozenset({admin.id, billing.id})]
    assert first.policy.to_dict()["encrypt"] == again.policy.to_dict()["encrypt"] == ["admin", "billing"]
    assert listed[0].policy == first.policy


def test_a_policy_names_no_auditor_and_no_one_missing(services: Services, billing: Principal) -> None:
    services.principals.create("reader", Role.AUDITOR)
    assert services.keys.unnameable(["billing", "reader", "nobody"]) == {
        "reader": Unnameable.AUDITOR,
        "nobody": Unnameable.MISSING,
    }
