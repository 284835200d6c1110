"""``/v1/audit``: reading and verifying the hash-chained audit log (auditor, admin)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from keymanager.api.audit_trail import unaudited
from keymanager.api.deps import AUTHORIZED, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES, IsoTime, QueryInt
from keymanager.domain.audit import AuditQuery, Outcome

router = APIRouter(
    prefix="/v1/audit",
    tags=["audit"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)


class AuditRecordOut(BaseModel):
    chain: int
    """The chain the record belongs to (one per audit writer process, and the changes' chains)."""
    position: int
    """Its place in the whole log (the listing's order and cursors); not covered by the hash."""
    seq: int
    """Its sequence number in its chain."""
    time: datetime
    request_id: str
    principal: str | None
    action: str
    key_id: str | None
    key_version: int | None
    outcome: str
    status: int
    client: str | None
    details: dict[str, Any]
    prev_hash: str
    hash: str
    seal: str | None
    """HMAC-SHA256 of the audit key (in the HSM) on the last record of each group commit."""


class AuditPage(BaseModel):
    records: list[AuditRecordOut]
    next: int | None
    """A position: pass it as ``after`` (``order=asc``) or ``before`` (``order=desc``) to read the
    next page; null on the last page."""


class AuditVerification(BaseModel):
    ok: bool
    records: int
    first_broken_seq: int | None
    first_broken_chain: int | None
    reason: str | None


class AuditFilter(BaseModel):
    """The query parameters of the listing: which records (key, principal, action, outcome, time),
    between which positions (the cursors), how many and in which order."""

    key: str | None = None
    principal: str | None = None
    action: str | None = None
    outcome: Annotated[Outcome | None, Field(description="ok, denied (401, 403) or error.")] = None
    since: Annotated[IsoTime | None, Field(description="ISO 8601; records at or after this time.")] = None
    after: Annotated[QueryInt, Field(ge=0, description="Records at a greater position.")] = 0
    before: Annotated[QueryInt | None, Field(ge=1, description="Records at a smaller position.")] = None
    limit: Annotated[QueryInt, Field(ge=1, le=1000)] = 100
    order: Annotated[Literal["asc", "desc"], Field(description="asc: oldest first; desc: newest first.")] = "asc"

    def query(self) -> AuditQuery:
        """The store's query for these parameters (all but ``key``, which the reader resolves)."""
        return AuditQuery(
            principal=self.principal,
            action=self.action,
            outcome=self.outcome,
            since=self.since,
            after=self.after,
            before=self.before,
            limit=self.limit,
            newest_first=self.order == "desc",
        )


@router.get("", response_model=AuditPage)
@unaudited("audit.read")
def list_audit(svc: ServicesDep, params: Annotated[AuditFilter, Query()]) -> AuditPage:
    """Records of every chain merged in position order (``order=desc``: newest first): within a
    chain, sequence order; across chains, the order the database stored them in. Filtered by key
    (name or id), principal, action, outcome and time; ``after`` / ``before`` bound the positions (the cursors)."""
    records = svc.audit_reader.query(params.query(), params.key)
    page = [AuditRecordOut(**r.fields()) for r in records]
    return AuditPage(records=page, next=records[-1].position if len(records) == params.limit else None)


@router.get("/verify", response_model=AuditVerification)
@unaudited("audit.verify")
def verify_audit(svc: ServicesDep) -> AuditVerification:
    """Check every chain, its links and its seals (with the HSM's audit key): ``ok``, or the
    first broken record (its chain and sequence number) and why. Records removed from the end of
    a chain back to an earlier seal, or a whole chain removed, are seen only against a
    checkpoint: ``keymanager audit verify --checkpoint``."""
    result = svc.audit_reader.verify()
    return AuditVerification(
        ok=result.ok,
        records=result.records,
        first_broken_seq=result.first_broken_seq,
        first_broken_chain=result.chain,
        reason=result.reason,
    )
