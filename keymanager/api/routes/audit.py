"""``/v1/audit``: reading and verifying the hash-chained audit log (auditor, admin)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from keymanager.api.audit_trail import unaudited
from keymanager.api.deps import AUTHORIZED, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES, IsoTime, QueryInt
from keymanager.domain.audit import AuditQuery

router = APIRouter(
    prefix="/v1/audit",
    tags=["audit"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)


class AuditRecordOut(BaseModel):
    seq: int
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
    """Pass as ``after`` (``order=asc``) or ``before`` (``order=desc``) to read the next page; null on the last page."""


class AuditVerification(BaseModel):
    ok: bool
    records: int
    first_broken_seq: int | None
    reason: str | None


@router.get("", response_model=AuditPage)
@unaudited("audit.read")
def list_audit(
    svc: ServicesDep,
    key: str | None = None,
    principal: str | None = None,
    action: str | None = None,
    since: Annotated[IsoTime | None, Query(description="ISO 8601; records at or after this time.")] = None,
    after: Annotated[QueryInt, Query(ge=0, description="Records with a greater sequence number.")] = 0,
    before: Annotated[QueryInt | None, Query(ge=1, description="Records with a smaller sequence number.")] = None,
    limit: Annotated[QueryInt, Query(ge=1, le=1000)] = 100,
    order: Annotated[Literal["asc", "desc"], Query(description="asc: oldest first; desc: newest first.")] = "asc",
) -> AuditPage:
    """Records in sequence order (``order=desc``: newest first), filtered by key (name or id),
    principal, action and time; ``after`` / ``before`` bound the sequence numbers (the cursors)."""
    query = AuditQuery(
        principal=principal,
        action=action,
        since=since,
        after=after,
        before=before,
        limit=limit,
        newest_first=order == "desc",
    )
    records = svc.audit_reader.query(query, key)
    page = [AuditRecordOut(**r.fields()) for r in records]
    return AuditPage(records=page, next=records[-1].seq if len(records) == limit else None)


@router.get("/verify", response_model=AuditVerification)
@unaudited("audit.verify")
def verify_audit(svc: ServicesDep) -> AuditVerification:
    """Check the whole chain, its links and its seals (with the HSM's audit key): ``ok``, or the
    first broken record and why. Records removed from the end back to an earlier seal are seen
    only against a checkpoint: ``keymanager audit verify --checkpoint``."""
    result = svc.audit_reader.verify()
    return AuditVerification(
        ok=result.ok, records=result.records, first_broken_seq=result.first_broken_seq, reason=result.reason
    )
