"""Access keys of the AWS KMS API and AppRole credentials of the Vault Transit API (admin): the calls,
and the methods both clients inherit.

A principal's access key signs AWS KMS API requests (SigV4) as that principal.
``km.create_access_key("billing")`` gives a :class:`NewAccessKey` whose secret the service shows
this once (``repr`` hides it); ``km.create_access_key("billing", access_key_id=…,
secret_access_key=…)`` registers a given pair; ``km.list_access_keys("billing")`` lists ids and
creation times, never secrets; ``km.delete_access_key("billing", id)`` revokes one at once.
``km.create_approle("billing")`` gives a :class:`NewAppRole` (``role_id`` and ``secret_id``, the
secret shown this once) for Vault's ``auth/approle/login``; ``list_approles`` and ``delete_approle``
as for access keys. Creating and deleting are never retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from keymanager_sdk._core import Call, _json_parser, _no_content, _path

T = TypeVar("T")


@dataclass(frozen=True)
class AccessKey:
    """An access key of a principal, as listed: its id and creation time."""

    access_key_id: str
    created_at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AccessKey:
        return cls(str(data["access_key_id"]), datetime.fromisoformat(str(data["created_at"])))


@dataclass(frozen=True)
class NewAccessKey(AccessKey):
    """An access key just created, with its secret (shown by the service only once)."""

    secret_access_key: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NewAccessKey:
        base = AccessKey.from_json(data)
        return cls(base.access_key_id, base.created_at, str(data["secret_access_key"]))


@dataclass(frozen=True)
class AppRole:
    """An AppRole credential of a principal, as listed: its role id and creation time."""

    role_id: str
    created_at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AppRole:
        return cls(str(data["role_id"]), datetime.fromisoformat(str(data["created_at"])))


@dataclass(frozen=True)
class NewAppRole(AppRole):
    """An AppRole credential just created, with its ``secret_id`` (shown by the service only once)."""

    secret_id: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NewAppRole:
        base = AppRole.from_json(data)
        return cls(base.role_id, base.created_at, str(data["secret_id"]))


def create_approle_call(principal: str) -> Call[NewAppRole]:
    path = _path("principals", principal, "approle")
    return Call("POST", path, _json_parser(NewAppRole.from_json), json={}, principal=principal)


def list_approles_call(principal: str) -> Call[list[AppRole]]:
    parse = _json_parser(lambda data: [AppRole.from_json(item) for item in data])
    return Call("GET", _path("principals", principal, "approle"), parse, retryable=True, principal=principal)


def delete_approle_call(principal: str, role_id: str) -> Call[None]:
    return Call("DELETE", _path("principals", principal, "approle", role_id), _no_content, principal=principal)


def create_access_key_call(
    principal: str, access_key_id: str | None, secret_access_key: str | None
) -> Call[NewAccessKey]:
    if (access_key_id is None) is not (secret_access_key is None):
        raise ValueError("give both access_key_id and secret_access_key, or neither")
    body = {} if access_key_id is None else {"access_key_id": access_key_id, "secret_access_key": secret_access_key}
    return Call(
        "POST",
        _path("principals", principal, "access-keys"),
        _json_parser(NewAccessKey.from_json),
        json=body,
        principal=principal,
    )


def list_access_keys_call(principal: str) -> Call[list[AccessKey]]:
    parse = _json_parser(lambda data: [AccessKey.from_json(item) for item in data])
    return Call("GET", _path("principals", principal, "access-keys"), parse, retryable=True, principal=principal)


def delete_access_key_call(principal: str, access_key_id: str) -> Call[None]:
    return Call(
        "DELETE", _path("principals", principal, "access-keys", access_key_id), _no_content, principal=principal
    )


class AccessKeyMethods:
    """Access key methods of :class:`~keymanager_sdk.KeyManager`."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    def create_access_key(
        self, principal: str, access_key_id: str | None = None, secret_access_key: str | None = None
    ) -> NewAccessKey:
        """A new access key of ``principal`` (or the given pair, both or neither); its secret is shown this once."""
        return self._run(create_access_key_call(principal, access_key_id, secret_access_key))

    def list_access_keys(self, principal: str) -> list[AccessKey]:
        """The ids and creation times of ``principal``'s access keys, oldest first."""
        return self._run(list_access_keys_call(principal))

    def delete_access_key(self, principal: str, access_key_id: str) -> None:
        """Revoke an access key of ``principal``: it stops authenticating at once."""
        self._run(delete_access_key_call(principal, access_key_id))

    def create_approle(self, principal: str) -> NewAppRole:
        """A new AppRole credential of ``principal`` (Vault Transit's login); its ``secret_id`` is shown this once."""
        return self._run(create_approle_call(principal))

    def list_approles(self, principal: str) -> list[AppRole]:
        """The role ids and creation times of ``principal``'s AppRole credentials, oldest first."""
        return self._run(list_approles_call(principal))

    def delete_approle(self, principal: str, role_id: str) -> None:
        """Delete an AppRole credential of ``principal`` and the client tokens its logins made."""
        self._run(delete_approle_call(principal, role_id))


class AsyncAccessKeyMethods:
    """Access key methods of :class:`~keymanager_sdk.AsyncKeyManager` (as :class:`AccessKeyMethods`, awaited)."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    async def create_access_key(
        self, principal: str, access_key_id: str | None = None, secret_access_key: str | None = None
    ) -> NewAccessKey:
        """A new access key of ``principal`` (or the given pair); its secret is shown this once."""
        return await self._run(create_access_key_call(principal, access_key_id, secret_access_key))

    async def list_access_keys(self, principal: str) -> list[AccessKey]:
        """The ids and creation times of ``principal``'s access keys, oldest first."""
        return await self._run(list_access_keys_call(principal))

    async def delete_access_key(self, principal: str, access_key_id: str) -> None:
        """Revoke an access key of ``principal``: it stops authenticating at once."""
        await self._run(delete_access_key_call(principal, access_key_id))

    async def create_approle(self, principal: str) -> NewAppRole:
        """A new AppRole credential of ``principal``; its ``secret_id`` is shown this once."""
        return await self._run(create_approle_call(principal))

    async def list_approles(self, principal: str) -> list[AppRole]:
        """The role ids and creation times of ``principal``'s AppRole credentials, oldest first."""
        return await self._run(list_approles_call(principal))

    async def delete_approle(self, principal: str, role_id: str) -> None:
        """Delete an AppRole credential of ``principal`` and the client tokens its logins made."""
        await self._run(delete_approle_call(principal, role_id))
