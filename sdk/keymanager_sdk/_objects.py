"""Managed objects that are not keys (secret data, opaque objects, certificates registered over
KMIP): the model, the calls, and the methods both clients inherit.

A caller sees the objects it owns or is named on (an admin every one); any other is ``NotFound``,
as one that does not exist. Only metadata is shown, never an object's value (KMIP's Get hands it
out)::

    for found in km.list_objects():                      # newest first, in every state
        print(found.id, found.object_type, found.state)
    km.destroy_object(object_id)                         # Conflict while active: revoke it over KMIP first

``destroy_object`` drops the object's value and answers the object in state ``destroyed`` (or
``destroyed_compromised``); ``Forbidden`` unless you own it or are an admin, ``Conflict`` while it
is active and once it is destroyed. It is never retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from keymanager_sdk._core import Call, _json_parser, _path
from keymanager_sdk._models import _time

T = TypeVar("T")


@dataclass(frozen=True)
class ManagedObject:
    """A managed object's metadata: ``object_type`` (``secret_data``, ``opaque_data`` or
    ``certificate``), ``state`` in KMIP's words (``pre_active``, ``active``, ``deactivated``,
    ``compromised``, ``destroyed``, ``destroyed_compromised``), ``owner`` (the registering
    principal's name, its id once that principal is deleted; None when unknown)."""

    id: str
    object_type: str
    state: str
    owner: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ManagedObject:
        owner = data.get("owner")
        return cls(
            id=str(data["id"]),
            object_type=str(data["object_type"]),
            state=str(data["state"]),
            owner=None if owner is None else str(owner),
            created_at=_time(data["created_at"]),
            updated_at=_time(data["updated_at"]),
        )


def list_objects_call() -> Call[list[ManagedObject]]:
    parse = _json_parser(lambda data: [ManagedObject.from_json(item) for item in data])
    return Call("GET", "/v1/objects", parse, retryable=True)


def get_object_call(object_id: str) -> Call[ManagedObject]:
    return Call("GET", _path("objects", object_id), _json_parser(ManagedObject.from_json), retryable=True)


def destroy_object_call(object_id: str) -> Call[ManagedObject]:
    return Call("DELETE", _path("objects", object_id), _json_parser(ManagedObject.from_json))


class ObjectMethods:
    """Managed-object methods of :class:`~keymanager_sdk.KeyManager`."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    def list_objects(self) -> list[ManagedObject]:
        """The managed objects you may see, in every state, newest first."""
        return self._run(list_objects_call())

    def get_object(self, object_id: str) -> ManagedObject:
        """One managed object's metadata; ``NotFound`` when there is none or you may not see it."""
        return self._run(get_object_call(object_id))

    def destroy_object(self, object_id: str) -> ManagedObject:
        """Destroy a managed object (its value is dropped, its metadata stays); the object after.

        ``Forbidden`` unless you own it or are an admin; ``Conflict`` while it is active (revoke it
        over KMIP first) and once it is destroyed; ``NotFound`` as ``get_object``. Never retried.
        """
        return self._run(destroy_object_call(object_id))


class AsyncObjectMethods:
    """Managed-object methods of :class:`~keymanager_sdk.AsyncKeyManager` (as :class:`ObjectMethods`, awaited)."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    async def list_objects(self) -> list[ManagedObject]:
        """The managed objects you may see, newest first."""
        return await self._run(list_objects_call())

    async def get_object(self, object_id: str) -> ManagedObject:
        """One managed object's metadata; ``NotFound`` when there is none or you may not see it."""
        return await self._run(get_object_call(object_id))

    async def destroy_object(self, object_id: str) -> ManagedObject:
        """Destroy a managed object; the object after. ``Conflict`` while active. Never retried."""
        return await self._run(destroy_object_call(object_id))
