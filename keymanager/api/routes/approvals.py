"""``/v1/approvals``: dual control (``services/approvals.py``). Approvers list and inspect the requests
guarded calls made, approve them by the digest of what will run, or deny them; admins set the
service's rules here and a key's own under ``/v1/keys/{key}/approval-rules``.

A guarded call on any route (or door) that lacks its approvals answers 202 with ``status``
``pending_approval`` and the request's id (``api/errors.py``); once approved, the same call sent
again by the same principal runs, once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AUTHORIZED, AuditDep, Caller, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES
from keymanager.domain.approvals import MAX_REASON, Request, State, Vote

router = APIRouter(
    prefix="/v1/approvals",
    tags=["approvals"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)
key_rules_router = APIRouter(
    prefix="/v1/keys",
    tags=["approvals"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)


class VoteOut(BaseModel):
    principal: str
    at: datetime


class DenialOut(VoteOut):
    reason: str | None = None


class ApprovalOut(BaseModel):
    """An approval request: what will run (``operations`` on ``target`` with ``arguments``, bound by
    ``digest``), who asked, its state and votes."""

    id: str
    operations: list[str]
    target: str
    arguments: dict[str, Any]
    digest: str = Field(description="SHA-256 of what will run: an approval sends it back")
    requester: str
    state: State
    approvals_required: int
    approvals: list[VoteOut]
    denial: DenialOut | None
    created_at: datetime
    expires_at: datetime
    executed_at: datetime | None

    @classmethod
    def of(cls, request: Request) -> ApprovalOut:
        proposal = request.proposal
        denial = request.denial
        return cls(
            id=request.id,
            operations=[op.value for op in proposal.operations],
            target=proposal.target,
            arguments=dict(proposal.arguments),
            digest=request.digest,
            requester=request.requester,
            state=request.state,
            approvals_required=request.approvals_required,
            approvals=[VoteOut(principal=v.principal, at=v.at) for v in request.votes],
            denial=_denial(denial),
            created_at=request.created_at,
            expires_at=request.expires_at,
            executed_at=request.executed_at,
        )


def _denial(denial: Vote | None) -> DenialOut | None:
    return None if denial is None else DenialOut(principal=denial.principal, at=denial.at, reason=denial.reason)


class Approve(BaseModel):
    model_config = ConfigDict(extra="forbid")
    digest: str = Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")


class Deny(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str | None = Field(default=None, max_length=MAX_REASON)


class RulesBody(BaseModel):
    """``{operation: {approvals, approvers?, ttl_hours?}}`` (``domain/approvals.py`` ``Guarded``)."""

    model_config = ConfigDict(extra="forbid")
    rules: dict[str, dict[str, Any]] = Field(max_length=16)


@router.get("", response_model=list[ApprovalOut])
@audited("approval.list")
def list_approvals(svc: ServicesDep, state: Annotated[State | None, Query()] = None) -> list[ApprovalOut]:
    """Approval requests (of ``state``), the newest first (at most 500)."""
    return [ApprovalOut.of(r) for r in svc.approvals.listed(state)]


@router.get("/rules", response_model=RulesBody)
@audited("approval.rules_read")
def get_rules(svc: ServicesDep) -> RulesBody:
    """The service's approval rules (approvers by name; null: any admin)."""
    return RulesBody(rules=svc.approvals.shown_rules())


@router.put("/rules", response_model=RulesBody)
@audited("approval.rules_update")
def put_rules(body: RulesBody, svc: ServicesDep, trail: AuditDep) -> RulesBody:
    """Replace the service's approval rules (``{}`` removes them); guarded by ``approval.rules`` itself.
    400 for a malformed rule or an approver that is no admin or auditor; 409 when a rule asks for more
    approvers than exist."""
    trail.details.update(operations=sorted(body.rules)[:16])
    return RulesBody(rules=svc.approvals.set_rules(body.rules, record=trail.success()))


@router.get("/{request_id}", response_model=ApprovalOut)
@audited("approval.read")
def get_approval(request_id: str, svc: ServicesDep) -> ApprovalOut:
    """One approval request; 404 when there is none."""
    return ApprovalOut.of(svc.approvals.get(request_id[:64]))


@router.post("/{request_id}/approve", response_model=ApprovalOut)
@audited("approval.approve")
def approve(request_id: str, body: Approve, acting: Caller, svc: ServicesDep, trail: AuditDep) -> ApprovalOut:
    """Approve the pending request whose digest is ``digest`` (what was inspected). 403: self-approval, or an
    approver the rule does not name; 409: not pending, approved by this principal already, another digest."""
    approved = svc.approvals.approve(request_id[:64], acting, body.digest, record=trail.success())
    return ApprovalOut.of(approved)


@router.post("/{request_id}/deny", response_model=ApprovalOut)
@audited("approval.deny")
def deny(request_id: str, body: Deny, acting: Caller, svc: ServicesDep, trail: AuditDep) -> ApprovalOut:
    """Close the open request unrun (an eligible approver, or its requester withdrawing it)."""
    denied = svc.approvals.deny(request_id[:64], acting, body.reason, record=trail.success())
    return ApprovalOut.of(denied)


@key_rules_router.get("/{key}/approval-rules", response_model=RulesBody)
@audited("approval.rules_read")
async def get_key_rules(key: str, svc: ServicesDep) -> RulesBody:
    """The key's own approval rules (the service's apply too: the stricter wins)."""
    found = await run_in_threadpool(svc.keys.find, key)
    return RulesBody(rules=await run_in_threadpool(svc.approvals.shown_rules, found.id))


@key_rules_router.put("/{key}/approval-rules", response_model=RulesBody)
@audited("approval.rules_update")
def put_key_rules(key: str, body: RulesBody, svc: ServicesDep, trail: AuditDep) -> RulesBody:
    """Replace the key's own approval rules; guarded by ``approval.rules`` (the service's and the key's)."""
    found = svc.keys.find(key)
    trail.key_id = found.id
    trail.details.update(operations=sorted(body.rules)[:16])
    return RulesBody(rules=svc.approvals.set_rules(body.rules, key_id=found.id, record=trail.success()))
