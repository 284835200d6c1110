"""``/v1/principals``: named callers with a role (admins manage them: ``services/authorization.py``);
``/v1/whoami``: the caller itself (any authenticated principal; not under ``/v1/principals/``,
where ``me`` would be a principal's name)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AUTHORIZED, AuditDep, Caller, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES
from keymanager.api.schemas.principals import PrincipalCreate, PrincipalCreated, PrincipalOut

router = APIRouter(
    prefix="/v1/principals",
    tags=["principals"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)
me_router = APIRouter(prefix="/v1", tags=["principals"], responses=ERROR_RESPONSES, route_class=StrictJsonRoute)


@me_router.get("/whoami", response_model=PrincipalOut)
@audited("principal.whoami")
def whoami(acting: Caller) -> PrincipalOut:
    """The principal the request's credential (bearer token or client certificate) belongs to: its
    name, role and certificate subject; 401 without a valid credential. Any role may ask."""
    return PrincipalOut.of(acting)


@router.post("", status_code=201, response_model=PrincipalCreated)
@audited("principal.create")
def create_principal(body: PrincipalCreate, svc: ServicesDep, trail: AuditDep) -> PrincipalCreated:
    """Create a principal. The response carries its bearer token, which is never shown again."""
    trail.details.update(name=body.name, role=body.role.value, **({"key_store": True} if body.key_store else {}))
    created = svc.principals.create(
        body.name,
        body.role,
        body.cert_subject,
        xks_uri_prefix=body.xks_uri_prefix,
        xks_region=body.xks_region,
        create_keys=body.create_keys,
        key_store=body.key_store,
        record=trail.success(),
    )
    return PrincipalCreated(**PrincipalOut.of(created.principal).model_dump(), token=created.token)


@router.get("", response_model=list[PrincipalOut])
@audited("principal.list")
def list_principals(svc: ServicesDep) -> list[PrincipalOut]:
    """Every principal (without tokens)."""
    return [PrincipalOut.of(p) for p in svc.principals.list()]


@router.delete("/{name}", status_code=204)
@audited("principal.delete")
def delete_principal(name: str, acting: Caller, svc: ServicesDep, trail: AuditDep) -> Response:
    """Delete a principal; its token stops working at once."""
    svc.principals.delete(name, acting=acting, record=trail.success())
    return Response(status_code=204)
