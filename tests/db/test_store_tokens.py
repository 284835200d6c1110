"""Token formats and origins of keys on SQLite and PostgreSQL; the first import enables a pending key."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from keymanager import errors
from keymanager.db import Store
from keymanager.domain.models import Algorithm, HsmObjects, KeyState, KeyVersion, Origin
from keymanager.domain.tokens import Luhn, TokenAlphabet, TokenFormat
from tests.db.test_store import a_key

T = datetime(2030, 1, 1, tzinfo=UTC)


def test_token_format_and_origin_round_trip(store: Store) -> None:
    fmt = TokenFormat(TokenAlphabet.DIGITS, 6, 4, Luhn.INVALID)
    key = replace(a_key("tokens"), algorithm=Algorithm.FF1_AES_256, token_format=fmt)
    store.create_key(key)
    stored = store.get_key("tokens")
    assert stored is not None and stored.token_format == fmt and stored.origin is Origin.HSM
    plain = a_key("plain")
    store.create_key(plain)
    assert store.get_key("plain") == plain  # no format, origin hsm


def test_first_import_enables_a_pending_key(store: Store) -> None:
    key = replace(a_key("byok"), state=KeyState.PENDING_IMPORT, origin=Origin.EXTERNAL, primary_version=0, versions={})
    store.create_key(key)
    assert store.get_key("byok") == key
    version = KeyVersion(key.id, 1, HsmObjects("km/x/v1/aes", None), T)
    imported = store.add_key_version(key.id, version, expected_primary=0, activate=True)
    assert (imported.state, imported.primary_version, imported.origin) == (KeyState.ENABLED, 1, Origin.EXTERNAL)
    second = KeyVersion(key.id, 2, HsmObjects("km/x/v2/aes", None), T)
    with pytest.raises(errors.Conflict):  # no longer pending: "activate" refuses
        store.add_key_version(key.id, second, expected_primary=1, activate=True)
    assert store.add_key_version(key.id, second, expected_primary=1).primary_version == 2
