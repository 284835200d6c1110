"""The managed objects that are not keys (secret data, opaque objects, certificates) as a service of
their own: listed, read (their metadata, never their value) and destroyed, whichever door asks.

The REST API (``/v1/objects``) and the KMIP door (``doors/kmip/objects.py``, which also registers
them and hands out their values) both ask the rules here: who sees an object (:func:`visible`: its
owner, an admin, a principal its policy names) and when one may be destroyed
(:meth:`ManagedObjectService.check_destroy`: by whoever manages it, never while it is active, once).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from keymanager.db.managed_objects import ManagedObjectStore
from keymanager.domain.audit import AuditEntry
from keymanager.domain.managed_objects import ManagedObject
from keymanager.domain.models import Lifecycle, Principal
from keymanager.errors import Conflict, NotFound
from keymanager.services.authorization import may_see, require_owner

DESTROY_DATE = "Destroy Date"
"""The KMIP attribute under which an object's destruction is dated (``attributes["dates"]``)."""
DESTROYED = (Lifecycle.DESTROYED, Lifecycle.DESTROYED_COMPROMISED)
"""The states of an object whose value is gone."""


@dataclass(frozen=True, slots=True)
class ShownObject:
    """An object as shown to a caller: its owner named (by id when that principal is gone, None when none)."""

    found: ManagedObject
    owner: str | None


def visible(found: ManagedObject, principal: Principal) -> bool:
    """Whether ``principal`` may see ``found`` at all: its owner, an admin, or one its policy names
    (what it may then do is :func:`require_owner`'s and the policy's say)."""
    return may_see(principal, found.owner_id, found.policy.names(principal.id))


class ManagedObjectService:
    """The registered objects in ``store``, their owners named by ``principal_names`` (id to name)."""

    def __init__(self, store: ManagedObjectStore, principal_names: Callable[[Collection[str]], dict[str, str]]) -> None:
        self._store = store
        self._names = principal_names

    def listed(self, principal: Principal) -> list[ShownObject]:
        """The objects ``principal`` may see (:func:`visible`), in every state, newest first."""
        return self._shown(self.visible_to(principal))

    def visible_to(self, principal: Principal) -> list[ManagedObject]:
        """The objects ``principal`` may see (:func:`visible`), in every state, newest first, as stored
        (what KMIP's Locate lists among the keys)."""
        return [found for found in self._store.all() if visible(found, principal)]

    def get(self, principal: Principal, object_id: str) -> ShownObject:
        """The object ``object_id``; NotFound when there is none or ``principal`` may not see it."""
        return self._shown([self._seen(principal, object_id)])[0]

    def destroy(
        self, principal: Principal, object_id: str, *, record: Callable[[ManagedObject], AuditEntry | None]
    ) -> ShownObject:
        """Destroy the object ``object_id`` as :meth:`check_destroy` allows, committing ``record`` of it
        (the caller's success record, naming the object) with the change; NotFound as :meth:`get`."""
        found = self._seen(principal, object_id)
        self.check_destroy(principal, found)
        return self._shown([self.destroyed(found, record=record(found))])[0]

    def check_destroy(self, principal: Principal, found: ManagedObject) -> None:
        """Nothing, if ``principal`` may destroy ``found`` now: Forbidden unless it manages the object
        (``require_owner``), Conflict while it is active (revoke it first) or once it is destroyed."""
        require_owner(principal, found.owner_id)
        if found.state is Lifecycle.ACTIVE:
            raise Conflict("the object is active: revoke it before destroying it")
        if found.state in DESTROYED:
            raise Conflict("the object is destroyed already")

    def destroyed(self, found: ManagedObject, *, record: AuditEntry | None) -> ManagedObject:
        """``found`` destroyed once :meth:`check_destroy` allowed it: Destroyed (Destroyed Compromised once
        compromised), its value dropped, its destruction dated, ``record`` committed in the change's
        transaction (PreconditionFailed when it changed since it was read)."""
        state = Lifecycle.DESTROYED_COMPROMISED if found.state is Lifecycle.COMPROMISED else Lifecycle.DESTROYED
        kept = dict(found.attributes)
        kept["dates"] = {**kept.get("dates", {}), DESTROY_DATE: int(time.time())}
        return self._store.change(found, state=state, attributes=kept, destroy=True, record=record)

    async def adestroyed(self, found: ManagedObject, *, record: AuditEntry | None) -> ManagedObject:
        """:meth:`destroyed` off the event loop."""
        return await asyncio.to_thread(self.destroyed, found, record=record)

    def _seen(self, principal: Principal, object_id: str) -> ManagedObject:
        found = self._store.get(object_id)
        if found is None or not visible(found, principal):
            raise NotFound("object not found")
        return found

    def _shown(self, objects: list[ManagedObject]) -> list[ShownObject]:
        owners = {found.owner_id for found in objects if found.owner_id is not None}
        names = self._names(owners) if owners else {}
        return [
            ShownObject(found, None if found.owner_id is None else names.get(found.owner_id, found.owner_id))
            for found in objects
        ]
