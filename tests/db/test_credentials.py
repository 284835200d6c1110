"""The throttle's credential index on SQLite and PostgreSQL: every kind of stored credential is
vouched for, a new one at once, a deleted one no longer; strangers share refreshes; the bound holds."""

from __future__ import annotations

import asyncio

from sqlalchemy import Engine

from keymanager.db import Store
from keymanager.db.credentials import CredentialReader
from keymanager.db.kms import KmsStore
from keymanager.domain.credentials import Credential, token_hash
from keymanager.services.credential_index import ACCESS_KEY, CredentialIndex
from tests.db.test_store import a_principal

ACCESS_KEY_ID = "KMAKAAAAAAAAAAAAAAAA"


def test_stored_credentials_of_every_kind_are_vouched_for_and_strangers_are_not(store: Store, engine: Engine) -> None:
    store.create_principal(a_principal("billing", cert_subject="CN=billing"), token_hash("kmt_billing"))
    KmsStore(engine).add_access_key("billing", ACCESS_KEY_ID, b"s", "l", record=None)
    index = CredentialIndex(CredentialReader(engine), limit=100)

    async def check() -> list[bool]:
        return [
            await index.holds(Credential.of_token("kmt_billing").cache_name),
            await index.holds(Credential(subject="CN=billing").cache_name),
            await index.holds(ACCESS_KEY + ACCESS_KEY_ID),
            await index.holds(Credential.of_token("kmt_guess").cache_name),
            await index.holds(Credential(subject="CN=stranger").cache_name),
            await index.holds(ACCESS_KEY + "KMAKBBBBBBBBBBBBBBBB"),
        ]

    assert asyncio.run(check()) == [True, True, True, False, False, False]
    assert len(index) == 3


def test_a_credential_made_after_the_index_is_seen_at_once_and_a_deleted_one_goes(store: Store, engine: Engine) -> None:
    index = CredentialIndex(CredentialReader(engine), limit=100)
    fresh = Credential.of_token("kmt_fresh").cache_name
    assert asyncio.run(index.holds(fresh)) is False
    store.create_principal(a_principal("fresh"), token_hash("kmt_fresh"))
    assert asyncio.run(index.holds(fresh)) is True
    store.delete_principal("fresh")
    assert asyncio.run(index.holds(Credential.of_token("kmt_other").cache_name)) is False  # a refresh
    assert asyncio.run(index.holds(fresh)) is False


def test_concurrent_strangers_share_refreshes(store: Store, engine: Engine) -> None:
    store.create_principal(a_principal("billing"), token_hash("kmt_billing"))
    index = CredentialIndex(CredentialReader(engine), limit=100)

    async def flood() -> list[bool]:
        names = [Credential.of_token(f"kmt_guess_{n}").cache_name for n in range(200)]
        return await asyncio.gather(*(index.holds(name) for name in names))

    assert asyncio.run(flood()) == [False] * 200
    assert index.refreshes <= 2  # the first caller's, and one shared by every caller that waited


def test_beyond_its_bound_the_index_holds_at_most_the_bound(store: Store, engine: Engine) -> None:
    for n in range(5):
        store.create_principal(a_principal(f"app{n}"), token_hash(f"kmt_{n}"))
    index = CredentialIndex(CredentialReader(engine), limit=3)
    held = [asyncio.run(index.holds(Credential.of_token(f"kmt_{n}").cache_name)) for n in range(5)]
    assert held.count(True) == 3
    assert len(index) == 3
