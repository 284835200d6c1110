"""Request dependencies: the process's services, the authenticated and authorized principal.

Every route authenticates one way, :func:`authenticate`, through a metadata snapshot
(:mod:`keymanager.services.snapshot`): the routes that use a key run on snapshots of their own
(:func:`run_authenticated`), every other route takes :data:`Caller` (or :data:`AUTHORIZED`, when
it needs no principal of its own), read fresh from the database. Authentication ends with the
services' one rule of roles (``services/authorization.py``) for the route's declared action:
no route names a role.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Request, params

from keymanager.api.audit_trail import AuditContext, audit_context
from keymanager.api.request_context import CREDENTIAL
from keymanager.domain.audit import AuditEntry
from keymanager.domain.credentials import Credential
from keymanager.domain.models import Principal
from keymanager.errors import Unauthenticated
from keymanager.services.authorization import authorize
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
    """The principal of the request's credential, looked up through ``snapshot`` (else 401), once the
    services' rule of roles lets it do the route's action (else 403)."""
    principal = await snapshot.principal(credential_of(request))
    trail.principal = principal.name
    request.scope["state"]["principal_id"] = principal.id  # for the request's log lines
    return authorize(principal, trail.action)


async def caller(request: Request, trail: AuditDep) -> Principal:
    """The principal of the request's credential, read fresh from the database (else 401), authorized
    for the route's action (else 403)."""
    return await authenticate(request, services_of(request).cache.snapshot(fresh=True), trail)


Caller = Annotated[Principal, Depends(caller)]


AUTHORIZED = params.Depends(caller)
"""A route dependency: the caller authenticated and authorized for the route's action, for a
route that needs no principal of its own (it names no role: the services decide)."""


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

    return await run_validated(svc.cache, svc.audit_log, attempt, record)
