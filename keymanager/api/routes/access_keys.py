"""``/v1/principals/{name}/access-keys``: AWS-style access keys for the KMS API (admin only).

The secret is in the answer of the creation only; it is stored sealed under an HSM key.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AUTHORIZED, AuditDep, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES
from keymanager.errors import InvalidRequest

router = APIRouter(
    prefix="/v1/principals",
    tags=["principals"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)


class AccessKeyCreate(BaseModel):
    """Empty for a generated pair; or the pair to register (both fields)."""

    model_config = ConfigDict(extra="forbid")
    access_key_id: str | None = Field(default=None, max_length=128)
    secret_access_key: str | None = Field(default=None, max_length=128)


_GENERATED = AccessKeyCreate()


class AccessKeyCreated(BaseModel):
    access_key_id: str
    secret_access_key: str
    created_at: datetime


class AccessKeyOut(BaseModel):
    access_key_id: str
    created_at: datetime


@router.post("/{name}/access-keys", status_code=201, response_model=AccessKeyCreated)
@audited("access_key.create")
async def create_access_key(
    name: str, svc: ServicesDep, trail: AuditDep, body: AccessKeyCreate = _GENERATED
) -> AccessKeyCreated:
    """A new access key of principal ``name`` (or the given pair): the secret is shown this once."""
    given = None
    if body.access_key_id is not None or body.secret_access_key is not None:
        if body.access_key_id is None or body.secret_access_key is None:
            raise InvalidRequest("give both access_key_id and secret_access_key, or neither")
        given = (body.access_key_id, body.secret_access_key)
    key_id, secret, created = await run_in_threadpool(svc.access_keys.create, name, given, record=trail.success())
    return AccessKeyCreated(access_key_id=key_id, secret_access_key=secret, created_at=created)


@router.get("/{name}/access-keys", response_model=list[AccessKeyOut])
@audited("access_key.list")
def list_access_keys(name: str, svc: ServicesDep) -> list[AccessKeyOut]:
    """Ids and creation times of the principal's access keys (never secrets)."""
    return [AccessKeyOut(access_key_id=i, created_at=c) for i, c in svc.access_keys.list(name)]


@router.delete("/{name}/access-keys/{access_key_id}", status_code=204)
@audited("access_key.delete")
def delete_access_key(name: str, access_key_id: str, svc: ServicesDep, trail: AuditDep) -> Response:
    """Revoke an access key: it stops authenticating at once, on every replica."""
    svc.access_keys.revoke(name, access_key_id, record=trail.success())
    return Response(status_code=204)
