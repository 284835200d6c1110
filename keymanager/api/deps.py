"""Request dependencies: the process's services and the authenticated principal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from keymanager.api.audit_trail import AuditContext, audit_context
from keymanager.api.front_door import CREDENTIAL
from keymanager.domain.credentials import Credential
from keymanager.domain.models import Principal, Role
from keymanager.errors import Forbidden, Unauthenticated
from keymanager.services.container import Services
from keymanager.services.snapshot import Snapshot


def services_of(request: Request) -> Services:
    """The process's services."""
    return request.app.state.services  # type: ignore[no-any-return]


async def services(request: Request) -> Services:
    return services_of(request)


ServicesDep = Annotated[Services, Depends(services)]
AuditDep = Annotated[AuditContext, Depends(audit_context)]


def credential_of(request: Request) -> Credential:
    """The credential the front door accepted for this request (Unauthenticated when there is none)."""
    credential = request.scope.get("state", {}).get(CREDENTIAL)
    if not isinstance(credential, Credential):
        raise Unauthenticated()
    return credential


def current_principal(request: Request, svc: ServicesDep, trail: AuditDep) -> Principal:
    """The principal of the request's credential, read from the database (routes without a snapshot); else 401."""
    principal = svc.principals.authenticate(credential_of(request))
    trail.principal = principal.name
    request.scope["state"]["principal_id"] = principal.id  # for the request's log lines
    return principal


async def authenticate(request: Request, keys: Snapshot, trail: AuditContext) -> Principal:
    """The principal of the request's credential through ``keys`` (the hot routes' snapshot); else 401."""
    principal = await keys.principal(credential_of(request))
    trail.principal = principal.name
    request.scope["state"]["principal_id"] = principal.id  # for the request's log lines
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


def require_role(*roles: Role) -> Callable[[Principal], Principal]:
    """A dependency that lets only principals with one of ``roles`` through (else 403)."""

    def check(principal: CurrentPrincipal) -> Principal:
        if principal.role not in roles:
            raise Forbidden(f"this needs the role {' or '.join(r.value for r in roles)}")
        return principal

    return check


Admin = Annotated[Principal, Depends(require_role(Role.ADMIN))]
