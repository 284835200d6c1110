"""The Transit door's store (a key's Transit settings, AppRole credentials, client tokens) on SQLite and
PostgreSQL: every change bumps the metadata version, logins are bounded per principal, expiry and
deletion end a token, a deleted principal takes its credentials with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from keymanager import errors
from keymanager.db import Store
from keymanager.db.credentials import CredentialReader
from keymanager.db.transit import MAX_APPROLES, Login, TransitSettings, TransitStore
from keymanager.domain.credentials import token_hash
from tests.db.test_store import a_key, a_principal


@pytest.fixture
def transit(engine: Engine) -> TransitStore:
    return TransitStore(engine)


def login(role_id: str, secret: str, token: str, *, now: datetime, ttl: float = 3600, bound: int = 3) -> Login:
    return Login(role_id, token_hash(secret), token_hash(token), now, now + timedelta(seconds=ttl), bound)


def test_settings_default_then_round_trip_as_changes(store: Store, transit: TransitStore) -> None:
    key = a_key()
    store.create_key(key)
    assert transit.settings(key.id) == TransitSettings()
    version = store.metadata_version()
    transit.set_settings(key.id, TransitSettings(True, 2), record=None)
    assert transit.settings(key.id) == TransitSettings(True, 2) and store.metadata_version() == version + 1
    with pytest.raises(errors.KeyNotFound):
        transit.set_settings("0" * 32, TransitSettings(), record=None)


def test_approle_credentials_are_bounded_listed_and_deleted(store: Store, transit: TransitStore) -> None:
    principal = a_principal("billing")
    store.create_principal(principal, "h" * 64)
    for number in range(MAX_APPROLES):
        owner, _ = transit.add_approle("billing", f"role-{number}", f"{number}" * 64, record=None)
        assert owner == principal
    with pytest.raises(errors.Conflict):
        transit.add_approle("billing", "role-x", "x" * 64, record=None)
    with pytest.raises(errors.NotFound):
        transit.add_approle("nobody", "role-y", "y" * 64, record=None)
    assert [r for r, _ in transit.approles_of("billing") or []] == ["role-0", "role-1"]
    assert transit.approles_of("nobody") is None
    assert transit.delete_approle("billing", "role-0", record=None) is True
    assert transit.delete_approle("billing", "role-0", record=None) is False


def test_logins_make_bounded_expiring_tokens_as_changes(store: Store, transit: TransitStore, engine: Engine) -> None:
    store.create_principal(a_principal("billing"), "h" * 64)
    transit.add_approle("billing", "role", token_hash("secret"), record=None)
    now = datetime.now(UTC)
    assert transit.login(login("role", "wrong", "t0", now=now), record=None) is None
    version = store.metadata_version()
    for number in range(5):
        found = transit.login(login("role", "secret", f"t{number}", now=now + timedelta(seconds=number)), record=None)
        assert found is not None and found.name == "billing"
    assert store.metadata_version() == version + 5
    live = [n for n in range(5) if transit.principal_by_client_token(token_hash(f"t{n}")) is not None]
    assert live == [2, 3, 4]  # at most 3 per principal: the oldest went first
    shown = transit.client_token(token_hash("t4"))
    assert shown is not None and shown.role_id == "role" and shown.expires_at > now
    assert transit.client_token(token_hash("t4"), now + timedelta(hours=2)) is None  # expired
    assert token_hash("t4") in CredentialReader(engine).credentials(100).token_hashes  # the throttle vouches
    assert transit.sweep_expired(now + timedelta(hours=2)) == 3 and transit.sweep_expired(now) == 0


def test_a_deleted_credential_or_principal_takes_its_tokens(store: Store, transit: TransitStore) -> None:
    store.create_principal(a_principal("billing"), "h" * 64)
    transit.add_approle("billing", "role", token_hash("secret"), record=None)
    now = datetime.now(UTC)
    transit.login(login("role", "secret", "t", now=now), record=None)
    assert transit.delete_approle("billing", "role", record=None)
    assert transit.principal_by_client_token(token_hash("t")) is None
    transit.add_approle("billing", "again", token_hash("secret2"), record=None)
    transit.login(login("again", "secret2", "u", now=now), record=None)
    assert store.delete_principal("billing")
    assert transit.principal_by_client_token(token_hash("u")) is None and transit.approles_of("billing") is None
