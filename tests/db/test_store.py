"""The metadata store, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import TypeVar

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, event, inspect, text
from sqlalchemy.pool import QueuePool

from keymanager import errors
from keymanager.db import Store, make_engine, migrate
from keymanager.db.models import Base
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm, HsmObjects, Key, KeyState, KeyVersion, Principal, Role
from keymanager.domain.policy import Policy

T = TypeVar("T")
T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
POLICY = Policy.from_dict(
    {
        "encrypt": ["billing"],
        "decrypt": ["billing", "support"],
        "generate_data_key": [],
        "reencrypt": [],
        "mac": [],
        "tokenize": [],
        "detokenize": [],
        "get_key_material": [],
        "not_before": None,
        "not_after": "2030-01-01T00:00:00+00:00",
    }
)


def a_principal(name: str = "billing", *, cert_subject: str | None = None) -> Principal:
    return Principal(id=new_id(), name=name, role=Role.APP, created_at=T0, cert_subject=cert_subject)


def a_version(key_id: str, number: int) -> KeyVersion:
    labels = HsmObjects(enc_label=f"{key_id}-v{number}-enc", mac_label=f"{key_id}-v{number}-mac")
    return KeyVersion(key_id=key_id, version=number, hsm=labels, created_at=T0 + timedelta(days=number))


def a_key(name: str = "cards", *, versions: int = 1) -> Key:
    key_id = new_id()
    return Key(
        id=key_id,
        name=name,
        algorithm=Algorithm.AES_256_CBC_HMAC_SHA256,
        state=KeyState.ENABLED,
        policy=POLICY,
        primary_version=versions,
        min_decryption_version=1,
        created_at=T0,
        updated_at=T0,
        description="card numbers",
        rotation_period_days=90,
        versions={n: a_version(key_id, n) for n in range(1, versions + 1)},
    )


def race(first: Callable[[], T], second: Callable[[], T]) -> list[T | errors.KeyManagerError]:
    """Run both callables at once in two threads; each one's result or KeyManagerError."""
    barrier = threading.Barrier(2)
    outcomes: list[T | errors.KeyManagerError] = []

    def run(call: Callable[[], T]) -> None:
        barrier.wait()
        try:
            outcomes.append(call())
        except errors.KeyManagerError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


# -- principals -----------------------------------------------------------------


def test_ping(store: Store) -> None:
    store.ping()


def test_close_releases_connections_and_the_store_stays_usable(store: Store, engine: Engine) -> None:
    store.ping()
    store.close()

    assert isinstance(engine.pool, QueuePool)
    assert engine.pool.checkedin() == 0
    store.ping()


def test_principal_is_found_by_name_token_hash_and_cert_subject(store: Store) -> None:
    principal = a_principal(cert_subject="CN=billing,O=Example")
    store.create_principal(principal, token_hash="a" * 64)

    assert store.principal_by_name("billing") == principal
    assert store.principal_by_token_hash("a" * 64) == principal
    assert store.principal_by_cert_subject("CN=billing,O=Example") == principal
    assert store.principal_by_name("nobody") is None
    assert store.principal_by_token_hash("b" * 64) is None
    assert store.principal_by_cert_subject("CN=nobody") is None


def test_principals_are_listed_by_name(store: Store) -> None:
    for index, name in enumerate(["support", "admin", "billing"]):
        store.create_principal(a_principal(name), token_hash=str(index) * 64)

    assert [p.name for p in store.list_principals()] == ["admin", "billing", "support"]


def test_delete_principal(store: Store) -> None:
    store.create_principal(a_principal("billing"), token_hash="a" * 64)

    assert store.delete_principal("billing") is True
    assert store.delete_principal("billing") is False
    assert store.principal_by_token_hash("a" * 64) is None
    assert store.list_principals() == []


def test_duplicate_principal_name_conflicts(store: Store) -> None:
    store.create_principal(a_principal("billing"), token_hash="a" * 64)

    with pytest.raises(errors.Conflict, match="a principal named 'billing' exists"):
        store.create_principal(a_principal("billing"), token_hash="b" * 64)
    assert len(store.list_principals()) == 1


def test_duplicate_cert_subject_conflicts(store: Store) -> None:
    store.create_principal(a_principal("billing", cert_subject="CN=app"), token_hash="a" * 64)

    with pytest.raises(errors.Conflict, match="certificate subject 'CN=app'"):
        store.create_principal(a_principal("support", cert_subject="CN=app"), token_hash="b" * 64)


# -- keys -----------------------------------------------------------------------


def test_key_is_found_by_id_and_by_name(store: Store) -> None:
    key = a_key(versions=2)
    store.create_key(key)

    assert store.get_key(key.id) == key
    assert store.get_key("cards") == key
    assert store.get_key("unknown") is None


def test_get_key_tries_the_id_before_the_name(store: Store) -> None:
    target = a_key("target")
    impostor = a_key(target.id)
    store.create_key(impostor)
    store.create_key(target)

    found = store.get_key(target.id)
    assert found is not None
    assert found.id == target.id


def statements_of(engine: Engine, read: Callable[[], object]) -> list[str]:
    """The SQL statements ``read()`` sends."""
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", count)
    try:
        read()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return statements


def test_get_key_and_list_keys_take_one_statement(store: Store, engine: Engine) -> None:
    keys = [a_key("cards", versions=3), a_key("email", versions=2), a_key("ssn", versions=1)]
    for key in keys:
        store.create_key(key)

    assert len(statements_of(engine, lambda: store.get_key("cards"))) == 1
    assert len(statements_of(engine, store.list_keys)) == 1
    assert store.get_key("cards") == keys[0]


def test_a_key_without_versions_is_read_with_none(store: Store) -> None:
    pending = replace(a_key("byok"), state=KeyState.PENDING_IMPORT, primary_version=0, versions={})
    store.create_key(pending)
    store.create_key(a_key("cards", versions=2))

    assert store.get_key("byok") == pending
    assert [(k.name, sorted(k.versions)) for k in store.list_keys()] == [("byok", []), ("cards", [1, 2])]


def test_keys_due_for_destruction_come_whole_in_date_order(store: Store) -> None:
    keys = [a_key(f"k{n}", versions=n) for n in (1, 3, 2)]
    for days, key in zip((3, 1, 2), keys, strict=True):
        store.create_key(key)
        store.schedule_deletion(key.id, T0 + timedelta(days=days))

    due = store.keys_to_destroy(T0 + timedelta(days=10))
    assert [(k.name, sorted(k.versions)) for k in due] == [("k3", [1, 2, 3]), ("k2", [1, 2]), ("k1", [1])]


def test_duplicate_key_name_conflicts_and_writes_nothing(store: Store) -> None:
    store.create_key(a_key("cards"))
    loser = a_key("cards", versions=2)

    with pytest.raises(errors.Conflict, match="a key named 'cards' exists"):
        store.create_key(loser)
    assert len(store.list_keys()) == 1
    assert store.get_key(loser.id) is None


def test_keys_are_listed_by_name_with_their_versions(store: Store) -> None:
    keys = [a_key("ssn", versions=1), a_key("cards", versions=3), a_key("email", versions=2)]
    for key in keys:
        store.create_key(key)

    listed = store.list_keys()
    assert [k.name for k in listed] == ["cards", "email", "ssn"]
    assert listed == sorted(keys, key=lambda k: k.name)


def test_policy_and_versions_round_trip(store: Store) -> None:
    policy = Policy.from_dict(
        {
            "encrypt": ["billing", "batch"],
            "mac": ["search"],
            "not_before": "2024-01-01T00:00:00+02:00",
            "not_after": "2031-06-30T23:59:59Z",
        }
    )
    key = replace(a_key(versions=2), policy=policy, algorithm=Algorithm.AES_256_GCM)
    key = replace(key, versions={1: replace(key.versions[1], hsm=HsmObjects("only-enc", None)), 2: key.versions[2]})
    store.create_key(key)

    stored = store.get_key(key.id)
    assert stored is not None
    assert stored.policy.to_dict() == policy.to_dict()
    assert stored.algorithm is Algorithm.AES_256_GCM
    assert stored.versions == key.versions
    assert stored.version(1) == KeyVersion(key.id, 1, HsmObjects("only-enc", None), T0 + timedelta(days=1))


def test_update_key_changes_what_is_given_and_bumps_updated_at(store: Store) -> None:
    key = a_key(versions=3)
    store.create_key(key)
    policy = Policy.from_dict({"decrypt": ["support"]})

    updated = store.update_key(
        key.id, description="PANs", policy=policy, state=KeyState.DISABLED, min_decryption_version=2
    )

    assert updated.description == "PANs"
    assert updated.policy.to_dict() == policy.to_dict()
    assert updated.state is KeyState.DISABLED
    assert updated.min_decryption_version == 2
    assert updated.updated_at > key.updated_at
    assert replace(updated, description=key.description, policy=key.policy, state=key.state,
                   min_decryption_version=1, updated_at=key.updated_at) == key  # fmt: skip
    assert store.get_key(key.id) == updated


def test_update_key_leaves_what_is_not_given(store: Store) -> None:
    key = a_key()
    store.create_key(key)

    updated = store.update_key(key.id, state=KeyState.PENDING_DELETION)

    assert replace(updated, state=KeyState.ENABLED, updated_at=T0) == key


def test_update_unknown_key_is_not_found(store: Store) -> None:
    with pytest.raises(errors.KeyNotFound):
        store.update_key(new_id(), description="x")


def test_add_key_version_makes_it_primary(store: Store) -> None:
    key = a_key(versions=1)
    store.create_key(key)

    rotated = store.add_key_version(key.id, a_version(key.id, 2), expected_primary=1)

    assert rotated.primary_version == 2
    assert rotated.versions == {1: key.versions[1], 2: a_version(key.id, 2)}
    assert rotated.updated_at > key.updated_at
    assert store.get_key(key.id) == rotated


def test_add_key_version_with_stale_primary_conflicts(store: Store) -> None:
    key = a_key(versions=2)
    store.create_key(key)

    with pytest.raises(errors.Conflict, match="rotated"):
        store.add_key_version(key.id, a_version(key.id, 2), expected_primary=1)
    assert store.get_key(key.id) == key


def test_add_key_version_to_unknown_key_is_not_found(store: Store) -> None:
    key_id = new_id()
    with pytest.raises(errors.KeyNotFound):
        store.add_key_version(key_id, a_version(key_id, 2), expected_primary=1)


def test_timestamps_come_back_aware_in_utc(store: Store) -> None:
    paris = timezone(timedelta(hours=2))
    created = datetime(2024, 5, 1, 14, 0, tzinfo=paris)
    store.create_principal(replace(a_principal(), created_at=created), token_hash="a" * 64)
    store.create_key(replace(a_key(), created_at=created))

    principal = store.principal_by_name("billing")
    key = store.get_key("cards")
    assert principal is not None
    assert key is not None
    for stamp in (principal.created_at, key.created_at, key.updated_at, key.versions[1].created_at):
        assert stamp.tzinfo is UTC
    assert principal.created_at == created
    assert principal.created_at.hour == 12


# -- concurrency ----------------------------------------------------------------


def test_concurrent_create_key_with_one_name_gives_one_conflict(store: Store) -> None:
    first, second = a_key("cards", versions=2), a_key("cards", versions=2)

    outcomes = race(lambda: store.create_key(first), lambda: store.create_key(second))

    assert sorted(type(o).__name__ for o in outcomes) == ["Conflict", "NoneType"]
    assert len(store.list_keys()) == 1


def test_concurrent_rotations_from_one_primary_give_one_conflict(store: Store) -> None:
    key = a_key(versions=1)
    store.create_key(key)

    def rotate() -> Key:
        return store.add_key_version(key.id, a_version(key.id, 2), expected_primary=1)

    outcomes = race(rotate, rotate)

    assert sorted(type(o).__name__ for o in outcomes) == ["Conflict", "Key"]
    stored = store.get_key(key.id)
    assert stored is not None
    assert stored.primary_version == 2
    assert sorted(stored.versions) == [1, 2]


# -- schema and availability ------------------------------------------------------


def test_migrate_again_is_a_no_op(store: Store, engine: Engine) -> None:
    key = a_key()
    store.create_key(key)

    migrate(engine)
    migrate(engine)

    assert store.get_key(key.id) == key
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [_head_revision()]


def test_migrations_create_exactly_the_model_schema(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        tables = set(inspect(connection).get_table_names())

    assert differences == []
    assert tables == {"alembic_version", *Base.metadata.tables}


def test_concurrent_migrations_of_a_blank_database_both_succeed(blank_database_url: str) -> None:
    engines = [make_engine(blank_database_url), make_engine(blank_database_url)]
    try:
        outcomes = race(lambda: migrate(engines[0]), lambda: migrate(engines[1]))
        assert outcomes == [None, None]
        Store(engines[0]).create_key(a_key())
    finally:
        for engine in engines:
            engine.dispose()


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("postgresql+psycopg://km:s3cret-pw@127.0.0.1:1/keymanager", id="postgresql"),
        pytest.param("sqlite:///{tmp_path}", id="sqlite"),
    ],
)
def test_unreachable_database_is_unavailable_without_leaking_the_url(
    url: str, tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    engine = make_engine(url.format(tmp_path=tmp_path))
    caplog.set_level(logging.WARNING)
    try:
        with pytest.raises(errors.DatabaseUnavailable) as raised:
            Store(engine).ping()
        with pytest.raises(errors.DatabaseUnavailable):
            migrate(engine)
    finally:
        engine.dispose()

    exc = raised.value
    assert exc.message == "the database is unavailable"
    assert exc.__cause__ is None
    assert exc.__suppress_context__
    for text_shown in (str(exc), repr(exc), caplog.text):
        assert "s3cret" not in text_shown
        assert "127.0.0.1:1" not in text_shown


def test_other_databases_are_refused_without_echoing_the_url() -> None:
    with pytest.raises(ValueError, match="unsupported database 'mysql'") as raised:
        make_engine("mysql://km:s3cret-pw@db/keymanager")
    assert "s3cret" not in str(raised.value)


def _head_revision() -> str:
    from alembic.script import ScriptDirectory

    from keymanager.db.migrate import MIGRATIONS_DIR

    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert head is not None
    return head


def test_conditional_update_applies_while_updated_at_is_unchanged(store: Store) -> None:
    key = a_key()
    store.create_key(key)
    updated = store.update_key(key.id, description="first", expected_updated_at=key.updated_at)
    assert updated.description == "first"
    assert updated.updated_at > key.updated_at
    assert updated.etag != key.etag


def test_conditional_update_with_a_stale_updated_at_is_a_failed_precondition(store: Store) -> None:
    key = a_key()
    store.create_key(key)
    store.update_key(key.id, description="someone else's")
    with pytest.raises(errors.PreconditionFailed):
        store.update_key(key.id, description="mine", expected_updated_at=key.updated_at)
    assert store.get_key(key.id).description == "someone else's"  # type: ignore[union-attr]
    with pytest.raises(errors.KeyNotFound):
        store.update_key(new_id(), description="x", expected_updated_at=key.updated_at)


def test_concurrent_conditional_updates_from_one_state_give_one_winner(store: Store) -> None:
    key = a_key()
    store.create_key(key)

    def edit() -> Key:
        return store.update_key(key.id, description="edit", expected_updated_at=key.updated_at)

    outcomes = race(edit, edit)

    assert sorted(type(o).__name__ for o in outcomes) == ["Key", "PreconditionFailed"]
