"""The ``credentials`` table (migration 0018) on SQLite and PostgreSQL, during a rolling upgrade:
a new principal's credentials are written as rows *and* into the old columns (an older replica
still authenticates it); the rows are what is read; a principal an older replica made (the
columns only) is still found, shown, indexed and kept unique; 0018 back-fills the rows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import Engine, MetaData, Table, insert, select, text

from keymanager import errors
from keymanager.db import Store, make_engine, migrate, principal_credentials
from keymanager.db.credentials import CredentialReader
from keymanager.db.kms import KmsStore
from keymanager.db.models import CredentialRow
from keymanager.domain.credential_kinds import stored_by_name
from keymanager.domain.credentials import Credential, new_id, token_hash
from keymanager.domain.models import Principal, Role
from keymanager.services.credential_index import CredentialIndex
from tests.db.test_audit_migration import upgrade
from tests.db.test_store import T0, a_principal

ACCESS_KEY_ID = "AKIAI2SFODNN7EXAMPLE"


def a_key_store(name: str = "aws", prefix: str = "keystores/prod", region: str | None = "eu-west-1") -> Principal:
    return Principal(id=new_id(), name=name, role=Role.XKS, created_at=T0, xks_uri_prefix=prefix, xks_region=region)


def as_an_older_replica(engine: Engine, name: str, role: str = "app", **columns: Any) -> str:
    """Store a principal as a replica of the previous version does: its ``principals`` row only (the
    credentials in its columns), the metadata version bumped. Its id."""
    principal_id = new_id()
    with engine.begin() as connection:
        principals = Table("principals", MetaData(), autoload_with=connection)
        row = {"id": principal_id, "name": name, "role": role, "token_hash": token_hash(f"kmt_{name}")}
        connection.execute(insert(principals).values(**row, created_at=T0, **columns))
        connection.execute(text("UPDATE metadata_version SET version = version + 1 WHERE id = 1"))
    return principal_id


def rows(engine: Engine) -> list[tuple[str, str, str, Any]]:
    with engine.connect() as connection:
        table = Table("credentials", MetaData(), autoload_with=connection)
        found = connection.execute(select(table.c.kind, table.c.name, table.c.principal_id, table.c.facts))
        return sorted((row.kind, row.name, row.principal_id, row.facts) for row in found)


def columns(engine: Engine, principal_id: str) -> tuple[Any, ...]:
    with engine.connect() as connection:
        statement = text("SELECT cert_subject, xks_uri_prefix, xks_region FROM principals WHERE id = :id")
        return tuple(connection.execute(statement, {"id": principal_id}).one())


def test_a_new_principal_writes_its_rows_and_the_old_columns(store: Store, engine: Engine) -> None:
    app, key_store = a_principal("billing", cert_subject="CN=billing"), a_key_store()
    store.create_principal(app, "a" * 64)
    store.create_principal(key_store, "b" * 64)
    store.create_principal(a_principal("plain"), "c" * 64)
    assert rows(engine) == sorted(
        [
            ("certificate_subject", "CN=billing", app.id, None),
            ("xks_uri_prefix", "keystores/prod", key_store.id, {"region": "eu-west-1"}),
        ]
    )
    assert columns(engine, app.id) == ("CN=billing", None, None)
    assert columns(engine, key_store.id) == (None, "keystores/prod", "eu-west-1")


def test_the_rows_are_what_is_read(store: Store, engine: Engine) -> None:
    app, key_store = a_principal("billing", cert_subject="CN=billing"), a_key_store()
    store.create_principal(app, "a" * 64)
    store.create_principal(key_store, "b" * 64)
    with engine.begin() as connection:  # the columns gone: what is read comes from the rows
        connection.execute(text("UPDATE principals SET cert_subject = NULL, xks_uri_prefix = NULL, xks_region = NULL"))
    assert store.principal_by_cert_subject("CN=billing") == app
    assert {p.name: p for p in store.list_principals()} == {"aws": key_store, "billing": app}
    with pytest.raises(errors.Conflict, match="a key store with xks_uri_prefix 'keystores/prod' exists"):
        store.create_principal(a_key_store("aws2"), "c" * 64)
    with pytest.raises(errors.Conflict, match="a principal with certificate subject 'CN=billing' exists"):
        store.create_principal(a_principal("support", cert_subject="CN=billing"), "d" * 64)


def test_a_principal_an_older_replica_made_is_found_shown_and_indexed(store: Store, engine: Engine) -> None:
    app_id = as_an_older_replica(engine, "old-app", cert_subject="CN=old")
    store_id = as_an_older_replica(engine, "old-aws", "xks", xks_uri_prefix="keystores/old", xks_region="us-east-1")
    assert rows(engine) == []
    found = store.principal_by_cert_subject("CN=old")
    assert found is not None and (found.id, found.name, found.cert_subject) == (app_id, "old-app", "CN=old")
    key_store = store.principal_by_name("old-aws")
    assert key_store is not None and key_store.id == store_id
    assert (key_store.xks_uri_prefix, key_store.xks_region) == ("keystores/old", "us-east-1")
    KmsStore(engine).add_access_key("old-aws", ACCESS_KEY_ID, b"s", "l", record=None)
    held = KmsStore(engine).access_key(ACCESS_KEY_ID)
    assert held is not None and held.principal == key_store  # what the XKS door compares with the path
    stored = CredentialReader(engine).credentials(100)
    assert stored.cert_subjects == ["CN=old"] and stored.complete


def test_a_principal_an_older_replica_made_keeps_its_names_unique(store: Store, engine: Engine) -> None:
    as_an_older_replica(engine, "old-app", cert_subject="CN=old")
    as_an_older_replica(engine, "old-aws", "xks", xks_uri_prefix="keystores/old")
    with pytest.raises(errors.Conflict, match="a principal with certificate subject 'CN=old' exists"):
        store.create_principal(a_principal("new-app", cert_subject="CN=old"), "a" * 64)
    with pytest.raises(errors.Conflict, match="a key store with xks_uri_prefix 'keystores/old' exists"):
        store.create_principal(a_key_store("new-aws", "keystores/old"), "b" * 64)
    assert {p.name for p in store.list_principals()} == {"old-app", "old-aws"} and rows(engine) == []


def test_the_index_reads_rows_and_older_replicas_columns_once_each(store: Store, engine: Engine) -> None:
    store.create_principal(a_principal("new-app", cert_subject="CN=new"), "a" * 64)
    as_an_older_replica(engine, "old-app", cert_subject="CN=old")
    assert sorted(CredentialReader(engine).credentials(100).cert_subjects) == ["CN=new", "CN=old"]
    bounded = CredentialReader(engine).credentials(1)
    assert len(bounded.cert_subjects) == 1 and not bounded.complete


def test_deleting_a_principal_deletes_its_rows(store: Store, engine: Engine) -> None:
    store.create_principal(a_principal("billing", cert_subject="CN=billing"), "a" * 64)
    store.create_principal(a_key_store(), "b" * 64)
    assert store.delete_principal("billing") and store.delete_principal("aws")
    assert rows(engine) == []
    store.create_principal(a_principal("again", cert_subject="CN=billing"), "c" * 64)  # the name is free again


def test_0018_backfills_the_rows_and_an_old_versions_principals_are_served(blank_database_url: str) -> None:
    engine = make_engine(blank_database_url)
    try:
        upgrade(engine, "0017")
        app_id = as_an_older_replica(engine, "billing", cert_subject="CN=billing")
        store_id = as_an_older_replica(engine, "aws", "xks", xks_uri_prefix="keystores/prod", xks_region="eu-west-1")
        anywhere_id = as_an_older_replica(engine, "aws-any", "xks", xks_uri_prefix="keystores/any")
        as_an_older_replica(engine, "plain")
        migrate(engine)
        assert rows(engine) == sorted(
            [
                ("certificate_subject", "CN=billing", app_id, None),
                ("xks_uri_prefix", "keystores/prod", store_id, {"region": "eu-west-1"}),
                ("xks_uri_prefix", "keystores/any", anywhere_id, None),
            ]
        )
        with engine.begin() as connection:  # the rows, not the columns, serve from now on
            connection.execute(text("UPDATE principals SET cert_subject = NULL"))
        store = Store(engine)
        found = store.principal_by_cert_subject("CN=billing")
        assert found is not None and found.id == app_id and found.created_at == T0
        shown = {p.name: (p.cert_subject, p.xks_uri_prefix, p.xks_region) for p in store.list_principals()}
        assert shown == {
            "aws": (None, "keystores/prod", "eu-west-1"),
            "aws-any": (None, "keystores/any", None),
            "billing": ("CN=billing", None, None),
            "plain": (None, None, None),
        }
        assert store.principal_by_token_hash(token_hash("kmt_plain")) is not None
        assert asyncio.run(_indexed(engine, Credential(subject="CN=billing").cache_name))
    finally:
        engine.dispose()


async def _indexed(engine: Engine, name: str) -> bool:
    return await CredentialIndex(CredentialReader(engine), limit=10).holds(name)


def test_a_rows_creation_time_is_its_principals(store: Store, engine: Engine) -> None:
    store.create_principal(a_principal("billing", cert_subject="CN=billing"), "a" * 64)
    with engine.connect() as connection:
        assert connection.execute(select(CredentialRow.created_at)).scalar_one() == T0


def test_every_kind_of_the_table_has_its_legacy_column_until_they_go() -> None:
    assert set(principal_credentials._LEGACY) == {kind.name for kind in stored_by_name()}
