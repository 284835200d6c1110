"""``/v1/principals``: named callers with a role (admin only)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from keymanager.api.deps import Admin, ServicesDep
from keymanager.api.schemas import ERROR_RESPONSES, PrincipalCreate, PrincipalCreated, PrincipalOut

router = APIRouter(prefix="/v1/principals", tags=["principals"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=PrincipalCreated)
def create_principal(body: PrincipalCreate, admin: Admin, svc: ServicesDep) -> PrincipalCreated:
    """Create a principal. The response carries its bearer token, which is never shown again."""
    created = svc.principals.create(body.name, body.role, body.cert_subject)
    return PrincipalCreated(**PrincipalOut.of(created.principal).model_dump(), token=created.token)


@router.get("", response_model=list[PrincipalOut])
def list_principals(admin: Admin, svc: ServicesDep) -> list[PrincipalOut]:
    """Every principal (without tokens)."""
    return [PrincipalOut.of(p) for p in svc.principals.list()]


@router.delete("/{name}", status_code=204)
def delete_principal(name: str, admin: Admin, svc: ServicesDep) -> Response:
    """Delete a principal; its token stops working at once."""
    svc.principals.delete(name, acting=admin)
    return Response(status_code=204)
