"""Request dependencies: the process's services and the authenticated principal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from keymanager.api.audit_trail import AuditContext, audit_context
from keymanager.domain.models import Principal, Role
from keymanager.errors import Forbidden, Unauthenticated
from keymanager.services.container import Services
from keymanager.services.snapshot import Snapshot

CLIENT_SUBJECT = "client_subject"


def services_of(request: Request) -> Services:
    """The process's services."""
    return request.app.state.services  # type: ignore[no-any-return]


async def services(request: Request) -> Services:
    return services_of(request)


ServicesDep = Annotated[Services, Depends(services)]
AuditDep = Annotated[AuditContext, Depends(audit_context)]


def current_principal(request: Request, svc: ServicesDep, trail: AuditDep) -> Principal:
    """A bearer token when one is sent; otherwise a verified TLS client certificate; else 401."""
    principal = _authenticate(request, svc)
    trail.principal = principal.name
    return principal


async def authenticate(request: Request, keys: Snapshot, trail: AuditContext) -> Principal:
    """:func:`current_principal` for the hot path: through the snapshot's cached principals."""
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated()
        principal = await keys.principal_by_token(token.strip())
    else:
        subject = request.scope.get("extensions", {}).get("tls", {}).get(CLIENT_SUBJECT)
        if not subject:
            raise Unauthenticated()
        principal = await keys.principal_by_subject(subject)
    trail.principal = principal.name
    return principal


def _authenticate(request: Request, svc: Services) -> Principal:
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated()
        return svc.principals.authenticate_token(token.strip())
    subject = request.scope.get("extensions", {}).get("tls", {}).get(CLIENT_SUBJECT)
    if subject:
        return svc.principals.authenticate_certificate(subject)
    raise Unauthenticated()


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


def require_role(*roles: Role) -> Callable[[Principal], Principal]:
    """A dependency that lets only principals with one of ``roles`` through (else 403)."""

    def check(principal: CurrentPrincipal) -> Principal:
        if principal.role not in roles:
            raise Forbidden(f"this needs the role {' or '.join(r.value for r in roles)}")
        return principal

    return check


Admin = Annotated[Principal, Depends(require_role(Role.ADMIN))]
