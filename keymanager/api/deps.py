"""Request dependencies: the process's services, the authenticated principal, role guards.

Every route authenticates one way, :func:`authenticate`, through a metadata snapshot
(:mod:`keymanager.services.snapshot`): the routes that use a key run on snapshots of their own
(:func:`run_authenticated`), every other route takes :data:`Caller`, read fresh from the
database. Role guards are route dependencies (``dependencies=[ADMIN]``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Request, params

from keymanager.api.audit_trail import AuditContext, audit_context
from keymanager.api.front_door import CREDENTIAL
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credentials import Credential
from keymanager.domain.models import Principal, Role
from keymanager.errors import Forbidden, Unauthenticated
from keymanager.services.container import Services
from keymanager.services.snapshot import Snapshot, run_validated

T = TypeVar("T")


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


async def authenticate(request: Request, snapshot: Snapshot, trail: AuditContext) -> Principal:
    """The principal of the request's credential, looked up through ``snapshot``; else 401."""
    principal = await snapshot.principal(credential_of(request))
    trail.principal = principal.name
    request.scope["state"]["principal_id"] = principal.id  # for the request's log lines
    return principal


async def caller(request: Request, trail: AuditDep) -> Principal:
    """The principal of the request's credential, read fresh from the database; else 401."""
    return await authenticate(request, services_of(request).cache.snapshot(fresh=True), trail)


Caller = Annotated[Principal, Depends(caller)]


def require_role(*roles: Role) -> params.Depends:
    """A route dependency letting only principals with one of ``roles`` through (else 403)."""

    async def check(principal: Caller) -> None:
        if principal.role not in roles:
            raise Forbidden(f"this needs the role {' or '.join(r.value for r in roles)}")

    return params.Depends(check)


ADMIN = require_role(Role.ADMIN)
READER = require_role(Role.AUDITOR, Role.ADMIN)
"""Who reads the audit log and the metrics."""


async def run_authenticated(
    request: Request,
    trail: AuditContext,
    use: Callable[[Snapshot, Principal], Awaitable[T]],
    record: Callable[[T], AuditEntry],
) -> T:
    """Authenticate the caller and run ``use`` on a metadata snapshot, committing ``record`` of its
    result (the request's success record, see ``AuditContext.success``) before returning; again
    on fresh reads when the snapshot turned out stale (``run_validated``)."""
    svc = services_of(request)

    async def attempt(snapshot: Snapshot) -> T:
        return await use(snapshot, await authenticate(request, snapshot, trail))

    return await run_validated(svc.cache, svc.audit_writer, attempt, record)
