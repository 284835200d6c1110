"""Locate, GetAttributes, GetAttributeList and the attribute changes (ModifyAttribute, DeleteAttribute,
SetAttribute), over both the keys and the registered objects a principal may see.

Every object is seen through a :class:`View`: its unique identifier, its attributes as attribute
name to values (what the server keeps — Unique Identifier, Object Type, State, Cryptographic
Algorithm and Length, dates — and what clients set, ``doors/kmip/attributes.py``), and how to
store changed client attributes. Locate matches every attribute the request names (names,
object type, state, algorithm, length, usage mask bits, groups, custom ``x-`` attributes, …)
against those values, newest first, then skips Offset Items and keeps Maximum Items. A principal
sees the keys it may (``services/keys.py`` ``visible``) and the objects it owns or is named on;
an admin sees all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from keymanager.domain.managed_objects import ManagedObject
from keymanager.domain.models import Key, KeyState, Lifecycle
from keymanager.doors.kmip import attributes as attrs
from keymanager.doors.kmip import spec
from keymanager.doors.kmip.calls import KmipCall
from keymanager.doors.kmip.keys import KmipKeys, kmip_type
from keymanager.doors.kmip.objects import KmipObjects
from keymanager.doors.kmip.pairs import PUBLIC_SUFFIX, is_pair, split
from keymanager.doors.kmip.refusals import NO_OBJECT, KmipRefusal, Reason, invalid
from keymanager.doors.kmip.requests import (
    Attribute,
    AttributeChange,
    AttributeNames,
    AttributesAnswer,
    AttributesRequest,
    Identified,
    Located,
    LocateRequest,
    Named,
)
from keymanager.errors import KeyNotFound
from keymanager.services.authorization import require_owner
from keymanager.services.keys import KeyService, LifecycleChange

A = spec.AttributeType
MAX_LOCATED = 1000
"""Most identifiers one Locate answers (Maximum Items asks for fewer)."""
_STATES = {
    Lifecycle.PRE_ACTIVE: spec.State.PRE_ACTIVE,
    Lifecycle.ACTIVE: spec.State.ACTIVE,
    Lifecycle.DEACTIVATED: spec.State.DEACTIVATED,
    Lifecycle.COMPROMISED: spec.State.COMPROMISED,
    Lifecycle.DESTROYED: spec.State.DESTROYED,
    Lifecycle.DESTROYED_COMPROMISED: spec.State.DESTROYED_COMPROMISED,
}

DEFAULT_POLICY_NAME = "default"
"""The Operation Policy Name of an object whose client named none (as PyKMIP's server answers)."""
_GONE = (spec.State.DESTROYED.value, spec.State.DESTROYED_COMPROMISED.value)


@dataclass(frozen=True)
class View:
    """One key or registered object as KMIP sees it."""

    uid: str
    created_at: datetime
    owner: str | None
    kept: Mapping[str, Any]
    """What clients set (the JSON of ``doors/kmip/attributes.py``)."""
    server: Mapping[str, list[Any]]
    """What the server keeps, attribute name to values."""
    save: Callable[[KmipCall, dict[str, Any]], Awaitable[None]]
    destroy_asked: bool = False
    """A key whose Destroy (or scheduled deletion) waits out its window: Locate leaves it out, as a
    destroyed object, unless a State is asked for (GetAttributes shows its state)."""

    @property
    def attributes(self) -> dict[str, list[Any]]:
        """Every attribute, name to values: the server's first; the Operation Policy Name ``default``
        unless the client set one (access is decided by the key's policy, as for every door)."""
        return {**self.server, A.OPERATION_POLICY_NAME.value: [DEFAULT_POLICY_NAME], **attrs.facts(self.kept)}


class KmipCatalog:
    """Locate and the attribute operations (see the module docstring)."""

    def __init__(self, keys: KeyService, kmip_keys: KmipKeys, objects: KmipObjects) -> None:
        self._keys = keys
        self._kmip_keys = kmip_keys
        self._objects = objects

    async def view(self, call: KmipCall, uid: str) -> View:
        """The object ``uid`` if the caller may see it; Item Not Found otherwise."""
        ref, public = split(uid)
        if public:
            views = [v for v in self._of_key(await self._kmip_keys.key(call, ref)) if v.uid == uid]
            if not views:
                raise KeyNotFound(NO_OBJECT)
            return views[0]
        found = await self._objects.find(uid)
        if found is not None:
            if not self._objects.visible(found, call.principal):
                return await self._key_view(call, uid)  # answered as for any unknown id
            call.key_id = found.id
            return self._object_view(found)
        return await self._key_view(call, uid)

    async def locate(self, call: KmipCall, payload: LocateRequest) -> Located:
        """The identifiers of the objects the caller may see that match every attribute given."""
        wanted = [attrs.parsed(attribute) for attribute in payload.attributes]
        if not any(name == A.STATE.value for name, _, _ in wanted):  # destroyed objects only when asked for
            views = [
                view
                for view in await self._visible_views(call)
                if view.server[A.STATE.value][0] not in _GONE and not view.destroy_asked
            ]
        else:
            views = await self._visible_views(call)
        criteria = [(name, value) for name, _, value in wanted]
        found = [view.uid for view in views if attrs.matches_all(view.attributes, criteria)]
        offset = payload.offset_items or 0
        limit = min(payload.maximum_items or MAX_LOCATED, MAX_LOCATED)
        page = found[offset : offset + limit]
        call.details["located"] = len(page)
        return Located(len(found), page)

    async def get_attributes(self, call: KmipCall, payload: AttributesRequest) -> AttributesAnswer:
        """The attributes named (every one, when none is), of an object the caller may see."""
        view = await self.view(call, call.uid(payload.unique_identifier))
        names = payload.attribute_names or None
        return AttributesAnswer(view.uid, attrs.built(view.attributes, names))

    async def get_attribute_list(self, call: KmipCall, payload: Named) -> AttributeNames:
        """The names of the object's attributes."""
        view = await self.view(call, call.uid(payload.unique_identifier))
        return AttributeNames(view.uid, list(view.attributes))

    async def add_attribute(self, call: KmipCall, payload: AttributeChange) -> AttributesAnswer:
        """Add an attribute's value (a multi-valued one gets one more; a single-valued one must be absent)."""
        view = await self._managed(call, call.uid(payload.unique_identifier))
        kept = _copy(view.kept)
        assert payload.attribute is not None  # the codec reads AddAttribute with its attribute
        name, _, value = attrs.parsed(payload.attribute)
        attrs.add(kept, name, value)
        await view.save(call, kept)
        return AttributesAnswer(view.uid, [payload.attribute])

    async def modify_attribute(self, call: KmipCall, payload: AttributeChange) -> Identified | AttributesAnswer:
        """Change one attribute's value (1.x: by name and index; 2.0: the current value, or the only one)."""
        view = await self._managed(call, call.uid(payload.unique_identifier))
        kept = _copy(view.kept)
        if payload.attribute is not None:
            name, index, value = attrs.parsed(payload.attribute)
        else:
            name, value = attrs.tagged(payload.new_attribute)
            index = _index_of(kept, name, payload.current_attribute)
        attrs.modify(kept, name, index, value)
        await view.save(call, kept)
        if payload.attribute is None:  # 2.0 answers the identifier only
            return Identified(view.uid)
        changed = Attribute(name, (index or 0) if name in attrs.MULTI else None, value)
        return AttributesAnswer(view.uid, [changed])

    async def set_attribute(self, call: KmipCall, payload: AttributeChange) -> Identified:
        """KMIP 2.0's SetAttribute: a single-valued attribute set (or replaced), a multi-valued one added to."""
        view = await self._managed(call, call.uid(payload.unique_identifier))
        kept = _copy(view.kept)
        name, value = attrs.tagged(payload.new_attribute)
        if name in attrs.MULTI:
            attrs.add(kept, name, value)
        else:
            try:
                attrs.modify(kept, name, None, value)
            except KmipRefusal:
                attrs.add(kept, name, value)
        await view.save(call, kept)
        return Identified(view.uid)

    async def delete_attribute(self, call: KmipCall, payload: AttributeChange) -> Identified | AttributesAnswer:
        """Remove an attribute's value (1.x: by name and index; 2.0: the current value or every value)."""
        view = await self._managed(call, call.uid(payload.unique_identifier))
        kept = _copy(view.kept)
        if payload.attribute_name is not None:
            removed = attrs.delete(kept, payload.attribute_name, payload.attribute_index)
            await view.save(call, kept)
            index, value = removed[0]  # 1.x answers the attribute it deleted, with its index
            deleted = Attribute(payload.attribute_name, index, value)
            return AttributesAnswer(view.uid, [deleted])
        if payload.current_attribute is not None:
            name, value = attrs.tagged(payload.current_attribute)
            attrs.delete(kept, name, None, value)
        else:
            if not payload.reference:
                raise invalid("DeleteAttribute names no attribute")
            attrs.delete(kept, payload.reference, None)
        await view.save(call, kept)
        return Identified(view.uid)

    async def _managed(self, call: KmipCall, uid: str) -> View:
        view = await self.view(call, uid)
        require_owner(call.principal, view.owner)
        return view

    async def _visible_views(self, call: KmipCall) -> list[View]:
        keys = await asyncio.to_thread(self._keys.list, call.principal)
        objects = await self._objects.listed(call.principal)
        views = [view for key in keys for view in self._of_key(key)] + [self._object_view(o) for o in objects]
        return sorted(views, key=lambda view: view.created_at, reverse=True)

    async def _key_view(self, call: KmipCall, uid: str) -> View:
        key = await self._kmip_keys.key(call, uid)
        return self._of_key(key)[0]

    def _of_key(self, key: Key) -> list[View]:
        """The views of a key: one, or for a key pair its private key's and (until retired) its public key's."""
        algorithm, length = kmip_type(key)
        pair = is_pair(key)
        kind = spec.ObjectType.PRIVATE_KEY if pair else spec.ObjectType.SYMMETRIC_KEY
        server: dict[str, list[Any]] = {
            A.UNIQUE_IDENTIFIER.value: [key.id],
            A.OBJECT_TYPE.value: [kind.value],
            A.STATE.value: [_STATES[key.lifecycle_state].value],
            A.CRYPTOGRAPHIC_ALGORITHM.value: [algorithm.value],
            A.CRYPTOGRAPHIC_LENGTH.value: [length],
        }
        if A.INITIAL_DATE.value not in key.attributes.get("dates", {}):
            server[A.INITIAL_DATE.value] = [int(key.created_at.timestamp())]

        async def save(call: KmipCall, kept: dict[str, Any]) -> None:
            change = LifecycleChange(attributes=kept)
            await asyncio.to_thread(self._keys.change_lifecycle, key, change, record=call.success(key.id))

        owner = key.attributes.get("owner")
        asked = key.state is KeyState.PENDING_DELETION
        views = [View(key.id, key.created_at, owner, key.attributes, server, save, asked)]
        if pair and not key.attributes.get("public_destroyed"):
            public = {
                **server,
                A.UNIQUE_IDENTIFIER.value: [key.id + PUBLIC_SUFFIX],
                A.OBJECT_TYPE.value: [spec.ObjectType.PUBLIC_KEY.value],
            }
            views.append(View(key.id + PUBLIC_SUFFIX, key.created_at, owner, key.attributes, public, save, asked))
        return views

    def _object_view(self, found: ManagedObject) -> View:
        server: dict[str, list[Any]] = {
            A.UNIQUE_IDENTIFIER.value: [found.id],
            A.OBJECT_TYPE.value: [spec.ObjectType[found.object_type].value],
            A.STATE.value: [_STATES[found.state].value],
        }
        if found.object_type == spec.ObjectType.CERTIFICATE.name:
            server[A.CERTIFICATE_TYPE.value] = [found.attributes.get("value_type") or spec.CertificateType.X_509.value]

        async def save(call: KmipCall, kept: dict[str, Any]) -> None:
            await self._objects.set_attributes(call, found, kept)

        return View(found.id, found.created_at, found.owner_id, found.attributes, server, save)


def _copy(kept: Mapping[str, Any]) -> dict[str, Any]:
    """A deep enough copy of a client's attributes to change (lists and dicts one level down)."""
    return {
        name: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for name, v in kept.items()
    }


def _index_of(kept: Mapping[str, Any], name: str, current: Attribute | None) -> int | None:
    """The index of ``current``'s value among a multi-valued attribute's (None: single-valued or not given)."""
    if current is None or name not in attrs.MULTI:
        return None
    _, value = attrs.tagged(current)
    values: list[Any] = list(kept.get(attrs.MULTI[name], []))
    if value not in values:
        raise KmipRefusal(Reason.ITEM_NOT_FOUND, f"the object has no such {name}", 404)
    return values.index(value)
