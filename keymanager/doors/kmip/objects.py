"""Register, Get, Activate, Revoke and Destroy of the objects that are not keys: secret data, opaque
objects, X.509 certificates (libmongocrypt without ``delegated`` Registers a 96-byte secret and Gets it).

Their values are stored sealed under an HSM key of their own (AES-256-GCM, or AES-256-CBC with
HMAC-SHA256 on a token without GCM: ``hsm/capabilities.py`` ``sealing_algorithm``; HSM objects
``km/kmip-objects-<scheme>/…``), bound to the object's id, never in clear (``db/managed_objects.py``). The registering
principal owns the object: it may Get its value and manage it; others get its value only when
its policy names them for ``get_key_material`` (none is named at registration), and an admin
manages every object but sees no value it is not named for. Get is audited like every operation.
Register is open to the principals that may create (``kmip.Register``: ``Right.CREATE_OWNED``).
Who sees an object and when it may be destroyed are the native service's rules
(``services/managed_objects.py``, which the REST API's ``/v1/objects`` asks too).
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from typing import Any

from keymanager.db.managed_objects import ManagedObjectStore
from keymanager.domain.credentials import new_id
from keymanager.domain.key_specs import ONE_AES_OBJECT, spec_of
from keymanager.domain.managed_objects import ManagedObject
from keymanager.domain.models import Algorithm, HsmObjects, Lifecycle, Principal
from keymanager.domain.policy import Operation, Policy
from keymanager.doors.kmip import attributes as attrs
from keymanager.doors.kmip import spec
from keymanager.doors.kmip.calls import KmipCall
from keymanager.doors.kmip.keys import revocation
from keymanager.doors.kmip.refusals import NO_OBJECT, KmipRefusal, Reason, denied, invalid, wrong_state
from keymanager.doors.kmip.requests import GetRequest, Got, Identified, Named, RegisterRequest, RevokeRequest, Secret
from keymanager.errors import Conflict, DecryptionFailed, KeyNotFound
from keymanager.hsm import Hsm
from keymanager.hsm.capabilities import sealing_algorithm
from keymanager.services.authorization import require_owner
from keymanager.services.managed_objects import ManagedObjectService, visible

SEALING_PREFIX = "kmip-objects-"
"""The sealing key of a scheme (``sealing_algorithm``): ``version_labels(SEALING_PREFIX + scheme, 1, scheme)``,
never swept as an orphan (its name is no key id)."""
MAX_VALUE_BYTES = 64 * 1024
"""Largest value a registered object may have."""
TYPES = (spec.ObjectType.SECRET_DATA, spec.ObjectType.OPAQUE_DATA, spec.ObjectType.CERTIFICATE)
"""The object types stored here."""
_VALUE_TYPES = {
    spec.ObjectType.SECRET_DATA: spec.SecretDataType.PASSWORD.value,
    spec.ObjectType.OPAQUE_DATA: spec.OpaqueDataType.NONE.value,
}
"""The value type Get answers for an object stored without one."""


class KmipObjects:
    """The registered objects of the KMIP door (see the module docstring)."""

    def __init__(self, store: ManagedObjectStore, hsm: Hsm, native: ManagedObjectService) -> None:
        """The objects in ``store``, sealed under keys of ``hsm``; listed, read and destroyed by the rules
        of ``native`` (the service the REST API shares)."""
        self._store = store
        self._native = native
        self._hsm = hsm
        self._lock = threading.Lock()
        self._seal_label: str | None = None

    async def find(self, uid: str) -> ManagedObject | None:
        """The object ``uid`` (any state), None when it is not one of these (perhaps a key)."""
        return await asyncio.to_thread(self._store.get, uid)

    async def listed(self, principal: Principal) -> list[ManagedObject]:
        """The registered objects ``principal`` may see, newest first (the native service's listing)."""
        return await asyncio.to_thread(self._native.visible_to, principal)

    async def register(self, call: KmipCall, payload: RegisterRequest) -> Identified:
        """Store the object sealed, owned by the caller; Pre-Active (Activate makes it Active)."""
        kind = payload.object_type
        if kind is None or kind not in TYPES:
            raise invalid(
                f"Register stores secret data, opaque objects and certificates here, not {getattr(kind, 'name', kind)}"
            )
        if payload.managed_object is None:
            raise KmipRefusal(Reason.MISSING_DATA, "Register needs the object itself")
        template = payload.template
        kept, server = attrs.client_attributes(template.attributes if template is not None else [])
        for name in server:
            if name not in (
                spec.AttributeType.CRYPTOGRAPHIC_ALGORITHM.value,
                spec.AttributeType.CRYPTOGRAPHIC_LENGTH.value,
            ):
                raise denied(f"the {name} attribute is kept by the server")
        value, value_type = _value(payload.managed_object)
        kept["owner"] = call.principal.id
        kept.setdefault("dates", {})[spec.AttributeType.INITIAL_DATE.value] = int(time.time())
        kept["value_type"] = value_type
        kept["value_bytes"] = len(value)
        object_id = new_id()
        label = await asyncio.to_thread(self._sealing_label)
        scheme, objects = _sealing(label)
        sealed = await self._hsm.aencrypt(objects, scheme, _bound(object_id), value, b"")
        now = datetime.now(UTC)
        found = ManagedObject(
            id=object_id,
            object_type=kind.name,
            state=Lifecycle.PRE_ACTIVE,
            owner_id=call.principal.id,
            policy=Policy(grants={Operation.GET_KEY_MATERIAL: frozenset({call.principal.id})}),
            attributes=kept,
            sealed=sealed,
            seal_label=label,
            created_at=now,
            updated_at=now,
        )
        call.key_id = object_id
        call.details["object_type"] = kind.name
        await asyncio.to_thread(self._store.add, found, record=call.success(object_id))
        call.batch.id_placeholder = object_id
        return Identified(object_id)

    async def get(self, call: KmipCall, found: ManagedObject, payload: GetRequest) -> Got:
        """The object's value, to its owner or a principal its policy names for ``get_key_material``."""
        _visible(found, call.principal)
        call.key_id = found.id
        if found.sealed is None or found.seal_label is None:
            raise wrong_state("the object is destroyed: its value is gone")
        if not found.policy.allows(Operation.GET_KEY_MATERIAL, call.principal.id):
            raise denied("the principal is not named for get_key_material on this object")
        scheme, objects = _sealing(found.seal_label)
        try:
            value = await self._hsm.adecrypt(objects, scheme, _bound(found.id), found.sealed, b"")
        except DecryptionFailed:
            raise KmipRefusal(
                Reason.GENERAL_FAILURE, "the stored object does not open (see the server's log)", 500
            ) from None
        kind = spec.ObjectType[found.object_type]
        value_type = found.attributes.get("value_type") or _VALUE_TYPES.get(kind)
        return Got(kind, found.id, value, value_type=value_type)

    async def activate(self, call: KmipCall, found: ManagedObject, payload: Named) -> Identified:
        """Pre-Active to Active."""
        self._managed(call, found)
        if found.state is not Lifecycle.PRE_ACTIVE:
            raise wrong_state(
                f"the object is {found.state.value.replace('_', '-')}, not pre-active: it cannot be activated"
            )
        await self._change(call, found, state=Lifecycle.ACTIVE, dated=spec.AttributeType.ACTIVATION_DATE.value)
        return Identified(found.id)

    async def revoke(self, call: KmipCall, found: ManagedObject, payload: RevokeRequest) -> Identified:
        """Active or Pre-Active to Deactivated (or, revoked as compromised, to Compromised)."""
        self._managed(call, found)
        compromised = revocation(call, payload)
        if found.state in (Lifecycle.DESTROYED, Lifecycle.DESTROYED_COMPROMISED):
            raise wrong_state("the object is destroyed")
        if not compromised and found.state not in (Lifecycle.ACTIVE, Lifecycle.PRE_ACTIVE):
            raise wrong_state(f"the object is {found.state.value}: only an active object is deactivated")
        state = Lifecycle.COMPROMISED if compromised else Lifecycle.DEACTIVATED
        await self._change(call, found, state=state, dated=spec.AttributeType.DEACTIVATION_DATE.value)
        return Identified(found.id)

    async def destroy(self, call: KmipCall, found: ManagedObject, payload: Named) -> Identified:
        """Drop the sealed value as the native service's rule allows (``ManagedObjectService.check_destroy``);
        Permission Denied while the object is Active (Wrong Key Lifecycle State in KMIP 2.0)."""
        _visible(found, call.principal)
        call.key_id = found.id
        try:
            self._native.check_destroy(call.principal, found)
        except Conflict as exc:
            raise wrong_state(exc.message) from None
        await self._native.adestroyed(found, record=call.success(found.id))
        return Identified(found.id)

    async def set_attributes(self, call: KmipCall, found: ManagedObject, kept: dict[str, Any]) -> None:
        """Store the attributes ``kept`` (the client's) of ``found``, which the caller manages."""
        self._managed(call, found)
        await asyncio.to_thread(self._store.change, found, attributes=kept, record=call.success(found.id))

    def visible(self, found: ManagedObject, principal: Principal) -> bool:
        """Whether ``principal`` may see ``found`` at all (the native service's rule, ``managed_objects.visible``)."""
        return visible(found, principal)

    def _managed(self, call: KmipCall, found: ManagedObject) -> None:
        _visible(found, call.principal)
        call.key_id = found.id
        require_owner(call.principal, found.owner_id)

    async def _change(self, call: KmipCall, found: ManagedObject, *, state: Lifecycle, dated: str) -> None:
        kept = dict(found.attributes)
        kept["dates"] = {**kept.get("dates", {}), dated: int(time.time())}
        record = call.success(found.id)
        await asyncio.to_thread(self._store.change, found, state=state, attributes=kept, record=record)

    def _sealing_label(self) -> str:
        """The AES object of the HSM key sealing new values: the token's first such key, or a new one."""
        with self._lock:
            if self._seal_label is None:
                scheme = sealing_algorithm(self._hsm.capabilities())
                name = SEALING_PREFIX + scheme.value.lower()
                labels = [label for label in self._hsm.find_labels(f"km/{name}/") if label.endswith("/aes")]
                if labels:
                    self._seal_label = sorted(labels)[0]
                else:
                    made = self._hsm.generate_version(name, 1, scheme)
                    assert made.enc_label is not None
                    self._seal_label = made.enc_label
            return self._seal_label


def _visible(found: ManagedObject, principal: Principal) -> None:
    if not visible(found, principal):
        raise KeyNotFound(NO_OBJECT)


def _value(managed: Secret) -> tuple[bytes, int]:
    """The value and the value's type (secret data type, opaque type, certificate type) of an object registered."""
    if not managed.readable:
        raise invalid("the object to register cannot be read")
    value = managed.value
    if not value or len(value) > MAX_VALUE_BYTES:
        raise invalid(f"a registered object's value is 1 to {MAX_VALUE_BYTES} bytes")
    return value, managed.value_type if managed.value_type is not None else 0


def _bound(object_id: str) -> bytes:
    """What a sealed value is bound to (authenticated, not encrypted): its object's id."""
    return f"km:kmip-object:{object_id}:".encode("ascii")


def _sealing(label: str) -> tuple[Algorithm, HsmObjects]:
    """The scheme and HSM objects of the sealing key whose AES object is ``label``."""
    scheme = Algorithm(label.split("/")[1].removeprefix(SEALING_PREFIX).upper())
    if spec_of(scheme).mode in ONE_AES_OBJECT:
        return scheme, HsmObjects(enc_label=label, mac_label=None)
    return scheme, HsmObjects(enc_label=label, mac_label=label.removesuffix("/aes") + "/hmac")
