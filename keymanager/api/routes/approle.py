"""``/v1/principals/{name}/approle``: a principal's AppRole credentials for the Vault Transit door's
``POST /v1/auth/approle/login`` (admin only; ``doors/transit/identity.py``).

The ``secret_id`` is in the answer of the creation only; only its SHA-256 is stored.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AUTHORIZED, AuditDep, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES

router = APIRouter(
    prefix="/v1/principals",
    tags=["principals"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)


class AppRoleCreated(BaseModel):
    role_id: str
    secret_id: str
    created_at: datetime


class AppRoleOut(BaseModel):
    role_id: str
    created_at: datetime


@router.post("/{name}/approle", status_code=201, response_model=AppRoleCreated)
@audited("approle.create")
async def create_approle(name: str, svc: ServicesDep, trail: AuditDep) -> AppRoleCreated:
    """A new AppRole credential of principal ``name`` (at most two at once): the ``secret_id`` is shown
    this once; 404 for an unknown principal, 400 for a key store, 409 past the bound."""
    made = await run_in_threadpool(svc.transit.approles.create, name, record=trail.success())
    return AppRoleCreated(role_id=made.role_id, secret_id=made.secret_id, created_at=made.created_at)


@router.get("/{name}/approle", response_model=list[AppRoleOut])
@audited("approle.list")
def list_approles(name: str, svc: ServicesDep) -> list[AppRoleOut]:
    """Role ids and creation times of the principal's AppRole credentials (never secrets)."""
    return [AppRoleOut(role_id=r, created_at=c) for r, c in svc.transit.approles.list(name)]


@router.delete("/{name}/approle/{role_id}", status_code=204)
@audited("approle.delete")
def delete_approle(name: str, role_id: str, svc: ServicesDep, trail: AuditDep) -> Response:
    """Delete an AppRole credential and every client token its logins made: they stop at once, everywhere."""
    svc.transit.approles.delete(name, role_id, record=trail.success())
    return Response(status_code=204)
