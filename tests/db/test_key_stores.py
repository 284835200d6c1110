"""Key stores (principals of role xks) in the metadata store: their prefix and region kept, the prefix unique."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from keymanager.db import Store
from keymanager.domain.models import Principal, Role
from keymanager.errors import Conflict


def a_store(name: str, prefix: str, region: str | None = "eu-west-1") -> Principal:
    return Principal(
        id=name.ljust(32, "0")[:32],
        name=name,
        role=Role.XKS,
        created_at=datetime.now(UTC),
        xks_uri_prefix=prefix,
        xks_region=region,
    )


def test_a_key_store_is_read_back_with_its_prefix_and_region(store: Store) -> None:
    store.create_principal(a_store("aaprod", "keystores/prod"), token_hash="a" * 64)
    store.create_principal(a_store("bbtest", "keystores/test", region=None), token_hash="b" * 64)
    found = store.principal_by_name("aaprod")
    assert found is not None and found.role is Role.XKS
    assert (found.xks_uri_prefix, found.xks_region) == ("keystores/prod", "eu-west-1")
    listed = {p.name: (p.xks_uri_prefix, p.xks_region) for p in store.list_principals()}
    assert listed == {"aaprod": ("keystores/prod", "eu-west-1"), "bbtest": ("keystores/test", None)}


def test_two_key_stores_cannot_share_a_prefix(store: Store) -> None:
    store.create_principal(a_store("aaprod", "keystores/prod"), token_hash="a" * 64)
    with pytest.raises(Conflict, match="xks_uri_prefix 'keystores/prod'"):
        store.create_principal(a_store("bbprod", "keystores/prod"), token_hash="b" * 64)
    assert [p.name for p in store.list_principals()] == ["aaprod"]


def test_principals_without_a_prefix_do_not_collide(store: Store) -> None:
    for index, name in enumerate(("app1", "app2")):
        store.create_principal(
            Principal(id=name.ljust(32, "0"), name=name, role=Role.APP, created_at=datetime.now(UTC)),
            token_hash=str(index) * 64,
        )
    assert {p.xks_uri_prefix for p in store.list_principals()} == {None}
