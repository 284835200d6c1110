"""Access keys of the AWS KMS API through the SDK (sync and async) and kmctl, against a real server."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from keymanager_sdk import AccessKey, AsyncKeyManager, Forbidden, KeyManager, NewAccessKey, NotFound

from tests.e2e.conftest import Server
from tests.sdk.conftest import App, unique
from tests.sdk.test_kmctl import kmctl, ok_json

GIVEN_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY0"


def given_id() -> str:
    """An access key id of the AWS form that no other test registers."""
    return "AKIA" + uuid.uuid4().hex.upper()


def kms(server: Server, access_key_id: str, secret: str) -> Any:
    return boto3.client(
        "kms",
        endpoint_url=server.url,
        region_name="eu-west-1",
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret,
        verify=str(server.ca),
        config=Config(retries={"max_attempts": 1}),
    )


def test_create_list_and_delete(server: Server, admin: KeyManager) -> None:
    name = unique("sdk-ak")
    admin.create_principal(name, "admin")
    made = admin.create_access_key(name)
    assert isinstance(made, NewAccessKey) and made.access_key_id.startswith("KMAK")
    assert len(made.secret_access_key) >= 40 and made.secret_access_key not in repr(made)
    assert kms(server, made.access_key_id, made.secret_access_key).list_keys(Limit=1)["Keys"] is not None
    given = admin.create_access_key(name, access_key_id=given_id(), secret_access_key=GIVEN_SECRET)
    assert given.secret_access_key == GIVEN_SECRET
    listed = admin.list_access_keys(name)
    assert [k.access_key_id for k in listed] == [made.access_key_id, given.access_key_id]
    assert all(type(k) is AccessKey for k in listed) and listed[0].created_at == made.created_at
    admin.delete_access_key(name, made.access_key_id)
    assert [k.access_key_id for k in admin.list_access_keys(name)] == [given.access_key_id]
    with pytest.raises(ClientError) as refused:
        kms(server, made.access_key_id, made.secret_access_key).list_keys(Limit=1)
    assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"


def test_refusals(server: Server, admin: KeyManager, app: KeyManager, app_principal: App) -> None:
    with pytest.raises(NotFound):
        admin.create_access_key(unique("nobody"))
    with pytest.raises(NotFound):
        admin.list_access_keys(unique("nobody"))
    with pytest.raises(NotFound):
        admin.delete_access_key(app_principal.name, "KMAK" + "A" * 16)
    with pytest.raises(Forbidden):
        app.create_access_key(app_principal.name)
    with pytest.raises(ValueError, match="both"):
        admin.create_access_key(app_principal.name, access_key_id=given_id())


def test_async_client(server: Server, admin: KeyManager) -> None:
    name = unique("async-ak")
    admin.create_principal(name, "app")

    async def main() -> tuple[NewAccessKey, list[AccessKey], list[AccessKey]]:
        async with AsyncKeyManager(server.url, token=server.admin_token, ca=str(server.ca)) as client:
            made = await client.create_access_key(name)
            listed = await client.list_access_keys(name)
            await client.delete_access_key(name, made.access_key_id)
            return made, listed, await client.list_access_keys(name)

    made, listed, after = asyncio.run(main())
    assert [k.access_key_id for k in listed] == [made.access_key_id] and after == []


def test_kmctl_access_keys(server: Server, admin: KeyManager) -> None:
    name = unique("cli-ak")
    admin.create_principal(name, "app")
    made = ok_json(server, "access-keys", "create", name)
    assert made["access_key_id"].startswith("KMAK") and len(made["secret_access_key"]) >= 40
    table = kmctl(server, "access-keys", "create", name)
    assert table.returncode == 0 and b"secret_access_key" in table.stdout, table.stderr
    registered_id = given_id()
    registered = kmctl(
        server,
        "access-keys",
        "create",
        name,
        "--access-key-id",
        registered_id,
        "--secret-stdin",
        "--json",
        stdin=GIVEN_SECRET.encode() + b"\n",
    )
    assert registered.returncode == 0, registered.stderr
    assert json.loads(registered.stdout)["secret_access_key"] == GIVEN_SECRET
    listed = ok_json(server, "access-keys", "list", name)
    assert listed[0]["access_key_id"] == made["access_key_id"] and len(listed) == 3
    assert "secret_access_key" not in listed[0]
    shown = kmctl(server, "access-keys", "list", name).stdout.decode()
    assert shown.startswith("ACCESS_KEY_ID") and registered_id in shown
    assert kmctl(server, "access-keys", "delete", name, made["access_key_id"]).returncode == 0
    assert made["access_key_id"] not in {k["access_key_id"] for k in ok_json(server, "access-keys", "list", name)}
    missing = kmctl(server, "access-keys", "delete", name, made["access_key_id"])
    assert missing.returncode == 1 and b"not_found" in missing.stderr
    usage = kmctl(server, "access-keys", "create", name, "--access-key-id", registered_id)
    assert usage.returncode == 2 and b"--secret-stdin" in usage.stderr
