"""``AsyncKeyManager`` against the real service: the same operations as the sync client, awaited.

Each test runs its own event loop (``asyncio.run``); tests of endpoints the service is still
gaining say so in their docstring ("waits on …").
"""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from keymanager_sdk import (
    AsyncKeyManager,
    DecryptionFailed,
    Encrypted,
    Forbidden,
    Key,
    KeyNotFound,
    Policy,
    PreconditionFailed,
)

from tests.e2e.conftest import Server
from tests.sdk.conftest import App, unique

T = TypeVar("T")
CARD = "4111111111111111"


def run(server: Server, token: str, body: Callable[[AsyncKeyManager], Awaitable[T]]) -> T:
    async def main() -> T:
        async with AsyncKeyManager(server.url, token=token, ca=str(server.ca)) as client:
            return await body(client)

    return asyncio.run(main())


def _policy(app: App) -> Policy:
    names = (app.name,)
    return Policy(encrypt=names, decrypt=names, generate_data_key=names, reencrypt=names, mac=names)


def test_admin_operations(server: Server, app_principal: App) -> None:
    async def body(admin: AsyncKeyManager) -> None:
        assert (await admin.health()).status == "ok" and (await admin.ready()).ok
        name = unique("async-p")
        created = await admin.create_principal(name, "app")
        assert created.token and name in {p.name for p in await admin.list_principals()}
        await admin.delete_principal(name)
        key = await admin.create_key(unique("async-k"), "AES_256_GCM", "d", _policy(app_principal))
        assert (await admin.get_key(key.name)).id == key.id and key.name in {k.name for k in await admin.list_keys()}
        assert (await admin.update_key(key.name, description="e")).description == "e"
        assert (await admin.disable_key(key.name)).state == "disabled"
        assert (await admin.enable_key(key.name)).state == "enabled"
        with pytest.raises(KeyNotFound):
            await admin.get_key(unique("none"))
        assert (await admin.verify_audit()).ok
        assert len(await admin.audit(key=key.name, limit=1)) == 1

    run(server, server.admin_token, body)


def test_encrypt_decrypt(server: Server, admin_key: Key, app_principal: App) -> None:
    async def body(app: AsyncKeyManager) -> None:
        ciphertexts = await asyncio.gather(
            *(app.encrypt(admin_key.name, f"{CARD}{i}", {"n": str(i)}) for i in range(8))
        )
        plaintexts = await asyncio.gather(*(app.decrypt(c, {"n": str(i)}) for i, c in enumerate(ciphertexts)))
        assert plaintexts == [f"{CARD}{i}".encode() for i in range(8)]
        with pytest.raises(DecryptionFailed):
            await app.decrypt(ciphertexts[0], {"n": "1"})
        result = await app.encrypt_with_version(admin_key.name, CARD)
        assert isinstance(result, Encrypted) and await app.decrypt(result.ciphertext, key=admin_key.id) == CARD.encode()
        with pytest.raises(Forbidden):
            await app.list_principals()

    run(server, app_principal.token, body)


@pytest.fixture
def admin_key(server: Server, app_principal: App) -> Key:
    async def body(admin: AsyncKeyManager) -> Key:
        return await admin.create_key(unique("async-k"), policy=_policy(app_principal))

    return run(server, server.admin_token, body)


def test_key_changes(server: Server, admin_key: Key) -> None:
    """Waits on POST …/rotate, DELETE /v1/keys/{key}?pending_days= and POST …/cancel-deletion."""

    async def body(admin: AsyncKeyManager) -> None:
        assert (await admin.rotate_key(admin_key.name)).primary_version == 2
        assert (await admin.schedule_key_deletion(admin_key.name, 30)).state == "pending_deletion"
        assert (await admin.cancel_key_deletion(admin_key.name)).state == "disabled"

    run(server, server.admin_token, body)


def test_batches_data_keys_reencrypt(server: Server, admin_key: Key, app_principal: App) -> None:
    """Waits on …/encrypt/batch, …/decrypt/batch, …/datakey and …/reencrypt."""

    async def body(app: AsyncKeyManager) -> None:
        encrypted = await app.encrypt_many(admin_key.name, [b"a", b"b", b"c"])
        ciphertexts = [e.ciphertext for e in encrypted if isinstance(e, Encrypted)]
        assert await app.decrypt_many(admin_key.name, ciphertexts) == [b"a", b"b", b"c"]
        data_key = await app.generate_data_key(admin_key.name, context={"f": "1"})
        assert await app.decrypt(data_key.ciphertext, {"f": "1"}) == data_key.plaintext
        again = await app.reencrypt(admin_key.name, ciphertexts[0])
        assert await app.decrypt(again.ciphertext) == b"a"

    run(server, app_principal.token, body)


def test_mac(server: Server, app_principal: App) -> None:
    """Waits on …/mac and …/mac/verify."""

    async def make(admin: AsyncKeyManager) -> Key:
        return await admin.create_key(unique("async-mac"), "HMAC_SHA256", policy=_policy(app_principal))

    key = run(server, server.admin_token, make)

    async def body(app: AsyncKeyManager) -> None:
        mac = await app.mac(key.name, CARD)
        assert await app.verify_mac(key.name, CARD, mac) and not await app.verify_mac(key.name, "x", mac)

    run(server, app_principal.token, body)


def test_envelope_streams(server: Server, admin_key: Key, app_principal: App, tmp_path: Path) -> None:
    """Envelope encryption with a data key from the service (…/datakey, /v1/decrypt)."""
    blob = os.urandom(700_000)
    (tmp_path / "in").write_bytes(blob)

    async def body(app: AsyncKeyManager) -> None:
        await app.encrypt_file(admin_key.name, tmp_path / "in", tmp_path / "in.kmev", {"f": "1"})
        await app.decrypt_file(tmp_path / "in.kmev", tmp_path / "out", {"f": "1"})
        assert (tmp_path / "out").read_bytes() == blob
        sealed, opened = io.BytesIO(), io.BytesIO()
        await app.encrypt_stream(admin_key.name, io.BytesIO(blob), sealed)
        await app.decrypt_stream(io.BytesIO(sealed.getvalue()), opened)
        assert opened.getvalue() == blob

    run(server, app_principal.token, body)


def test_onboard_streams(server: Server, admin_key: Key, app_principal: App) -> None:
    """Waits on POST /v1/keys/{key}/encrypt/stream and …/decrypt/stream."""
    blob = os.urandom(700_000)

    async def body(app: AsyncKeyManager) -> None:
        onboard, back = io.BytesIO(), io.BytesIO()
        await app.encrypt_stream_onboard(admin_key.name, io.BytesIO(blob), onboard)
        await app.decrypt_stream_onboard(admin_key.name, io.BytesIO(onboard.getvalue()), back)
        assert back.getvalue() == blob

    run(server, app_principal.token, body)


def test_update_key_if_match(server: Server, admin_key: Key) -> None:
    """get_key gives the etag; update_key(if_match=) applies it, a stale one is PreconditionFailed."""

    async def body(admin: AsyncKeyManager) -> None:
        seen = await admin.get_key(admin_key.name)
        assert seen.etag and seen.etag.startswith('"')
        changed = await admin.update_key(admin_key.name, description="one", if_match=seen.etag)
        assert changed.description == "one" and changed.etag not in (None, seen.etag)
        with pytest.raises(PreconditionFailed) as refused:
            await admin.update_key(admin_key.name, description="two", if_match=seen.etag)
        assert (refused.value.status, refused.value.code) == (412, "precondition_failed")
        assert (await admin.get_key(admin_key.name)).description == "one"

    run(server, server.admin_token, body)
