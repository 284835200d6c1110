"""``/v1/objects``: the managed objects that are not keys (secret data, opaque objects, certificates,
registered over KMIP), listed, read and destroyed.

A caller sees the objects it owns or is named on (an admin every one), as over KMIP
(``services/managed_objects.py``); any other object is 404 ``not_found``, as one that does not exist.
No answer carries an object's value.
"""

from __future__ import annotations

from fastapi import APIRouter

from keymanager.api.audit_trail import AuditContext, audited
from keymanager.api.deps import AuditDep, Caller, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES
from keymanager.api.schemas.objects import ObjectOut
from keymanager.domain.audit import AuditEntry
from keymanager.domain.managed_objects import ManagedObject

router = APIRouter(prefix="/v1/objects", tags=["objects"], responses=ERROR_RESPONSES, route_class=StrictJsonRoute)


@router.get("", response_model=list[ObjectOut])
@audited("object.list")
def list_objects(acting: Caller, svc: ServicesDep) -> list[ObjectOut]:
    """The objects the caller may see, in every state, newest first."""
    return [ObjectOut.of(shown) for shown in svc.objects.listed(acting)]


@router.get("/{object_id}", response_model=ObjectOut)
@audited("object.get")
def get_object(object_id: str, acting: Caller, svc: ServicesDep, trail: AuditDep) -> ObjectOut:
    """One object's metadata; 404 ``not_found`` when there is none or the caller may not see it."""
    shown = svc.objects.get(acting, object_id)
    trail.key_id = shown.found.id
    return ObjectOut.of(shown)


@router.delete("/{object_id}", response_model=ObjectOut)
@audited("object.destroy")
def destroy_object(object_id: str, acting: Caller, svc: ServicesDep, trail: AuditDep) -> ObjectOut:
    """Destroy an object (its value is dropped; its metadata stays, in state ``destroyed``) and answer it.

    403 unless the caller owns it or is an admin; 409 ``conflict`` while it is active (revoke it first,
    over KMIP) and once it is destroyed; 404 as ``GET``."""
    return ObjectOut.of(svc.objects.destroy(acting, object_id, record=lambda found: _success(trail, found)))


def _success(trail: AuditContext, found: ManagedObject) -> AuditEntry:
    """The success record of a change of ``found``, naming it (committed with the change)."""
    trail.key_id = found.id
    return trail.success()
