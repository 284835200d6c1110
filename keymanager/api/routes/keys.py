"""``/v1/keys``: create, list, read and change keys.

Every answer about one key carries its metadata version as an ``ETag``; ``PATCH`` honours
``If-Match`` (412 ``precondition_failed`` when the key has changed since), so a
read-modify-write of a policy cannot silently drop someone else's change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import TypeAdapter

from keymanager.api.audit_trail import AuditContext, audited
from keymanager.api.deps import AUTHORIZED, AuditDep, ServicesDep, run_authenticated, services_of
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES, ErrorBody, QueryInt
from keymanager.api.schemas.keys import KeyCreate, KeyOut, KeyPatch
from keymanager.domain.audit import AuditEntry
from keymanager.domain.models import Key
from keymanager.services.container import Services
from keymanager.services.key_creation import NewKey
from keymanager.services.keys import ShownKey

router = APIRouter(prefix="/v1/keys", tags=["keys"], responses=ERROR_RESPONSES, route_class=StrictJsonRoute)
_KEY_LIST = TypeAdapter(list[KeyOut])


def _tagged(svc: Services, key: Key, response: Response) -> KeyOut:
    """The key's representation (its policy naming principals by name), with its metadata
    version in the ``ETag`` header."""
    response.headers["ETag"] = key.etag
    return KeyOut.of(key, svc.keys.named([key.policy])[0])


@router.post("", status_code=201, response_model=KeyOut, dependencies=[AUTHORIZED])
@audited("key.create")
def create_key(body: KeyCreate, svc: ServicesDep, trail: AuditDep, response: Response) -> KeyOut:
    """Generate a key inside the HSM (version 1) and record it. 409 ``conflict`` if the name is taken;
    400 naming the spec and the missing mechanism when the HSM lacks what the spec needs."""
    trail.details.update(name=body.name, algorithm=body.algorithm.value)
    if body.usage is not None:
        trail.details.update(usage=body.usage.value)
    new = NewKey(
        body.name,
        algorithm=body.algorithm,
        description=body.description,
        policy=body.policy.to_policy(),
        rotation_period_days=body.rotation_period_days,
        token_format=None if body.token_format is None else body.token_format.to_format(),
        origin=body.origin,
        usage=body.usage,
    )
    key = svc.keys.create(new, record=trail.success())
    return _tagged(svc, key, response)


@router.get("", response_model=list[KeyOut])
@audited("key.list")
async def list_keys(request: Request, trail: AuditDep) -> Response:
    """Every key for an admin; for others, the keys whose policy names them."""
    keys = services_of(request).keys
    shown = await run_authenticated(
        request, trail, lambda _snapshot, principal: keys.listed(principal), lambda _shown: trail.success()
    )
    return Response(_KEY_LIST.dump_json([KeyOut.of(s.key, s.policy) for s in shown]), media_type="application/json")


@router.get("/{key}", response_model=KeyOut)
@audited("key.read")
async def get_key(key: str, request: Request, trail: AuditDep) -> Response:
    """One key by name or id; 403 when its policy does not name a non-admin caller."""
    keys = services_of(request).keys
    shown = await run_authenticated(
        request, trail, lambda snapshot, principal: keys.read(snapshot, principal, key), lambda s: _read(trail, s)
    )
    body = KeyOut.of(shown.key, shown.policy).model_dump_json()
    return Response(body, media_type="application/json", headers={"ETag": shown.key.etag})


def _read(trail: AuditContext, shown: ShownKey) -> AuditEntry:
    """The success record of a key read, naming the key (committed by ``run_authenticated``)."""
    trail.key_id = shown.key.id
    return trail.success()


@router.patch(
    "/{key}",
    response_model=KeyOut,
    dependencies=[AUTHORIZED],
    responses={412: {"model": ErrorBody, "description": "precondition_failed: If-Match names an older state"}},
)
@audited("key.update")
def update_key(
    key: str,
    body: KeyPatch,
    svc: ServicesDep,
    trail: AuditDep,
    response: Response,
    if_match: Annotated[str | None, Header(description="Change only if the key's ETag is still this.")] = None,
) -> KeyOut:
    """Change the description, the policy (replaced whole), ``enabled`` or ``min_decryption_version``.

    With ``If-Match``, only while the key's ``ETag`` is one named there (412 otherwise).
    400 when the policy names a principal that does not exist.
    """
    trail.details.update(changed=sorted(body.model_fields_set))
    updated = svc.keys.update(
        key,
        description=body.description,
        policy=body.policy.to_policy() if body.policy is not None else None,
        enabled=body.enabled,
        min_decryption_version=body.min_decryption_version,
        record=trail.success(),
        if_match=if_match,
    )
    return _tagged(svc, updated, response)


@router.post("/{key}/rotate", response_model=KeyOut, dependencies=[AUTHORIZED])
@audited("key.rotate")
def rotate_key(key: str, svc: ServicesDep, trail: AuditDep, response: Response) -> KeyOut:
    """Make a new HSM-generated version primary; older versions still decrypt down to ``min_decryption_version``."""
    rotate = svc.lifecycle.rotate
    return _changed(svc, key, trail, response, lambda found, record: rotate(found, record=record))


@router.delete("/{key}", response_model=KeyOut, dependencies=[AUTHORIZED])
@audited("key.schedule_deletion")
def schedule_key_deletion(
    key: str,
    svc: ServicesDep,
    trail: AuditDep,
    response: Response,
    pending_days: Annotated[
        QueryInt | None, Query(description="Waiting period in days (default 30, minimum 7).")
    ] = None,
) -> KeyOut:
    """Stop all use of the key now and destroy its HSM objects after the waiting period."""
    schedule = svc.lifecycle.schedule_deletion
    return _changed(svc, key, trail, response, lambda found, record: schedule(found, pending_days, record=record))


@router.post("/{key}/cancel-deletion", response_model=KeyOut, dependencies=[AUTHORIZED])
@audited("key.cancel_deletion")
def cancel_key_deletion(key: str, svc: ServicesDep, trail: AuditDep, response: Response) -> KeyOut:
    """Return a key pending deletion to ``disabled`` (enable it with PATCH when wanted)."""
    cancel = svc.lifecycle.cancel_deletion
    return _changed(svc, key, trail, response, lambda found, record: cancel(found, record=record))


def _changed(
    svc: Services, key: str, trail: AuditContext, response: Response, change: Callable[[Key, AuditEntry], Key]
) -> KeyOut:
    """``change`` applied to the key named ``key`` with the request's success record (committed with the change)."""
    return _tagged(svc, change(svc.keys.find(key), trail.success()), response)
