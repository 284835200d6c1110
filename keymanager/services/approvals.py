"""Dual control: the one gate every guarded operation passes, whichever door asked, and the approval
flow (``domain/approvals.py``, ``docs/usage.md`` "Dual control").

A service about to run a guarded operation opens :meth:`ApprovalService.guard` with the call's
:class:`~keymanager.domain.approvals.Proposal` and the door's audit record (which names the
requester). When no rule applies, the operation runs. Otherwise the requester's approved request for
exactly this proposal (same digest) is spent — moved to ``executed`` once, in a conditional update —
and the operation runs; if it then fails, the request is approved again. Without one, the call
becomes (or stays) a pending request and :class:`~keymanager.errors.ApprovalPending` is raised: the
operation does not run and every door answers it in its own words, naming the request.

Approvers see the request (its operations, target, arguments and digest) and approve it by sending
that digest back, so what they approve is what will run. Self-approval never counts, one principal
counts once, an expired, denied or executed request never runs. Every step writes its audit record
in the sealed chain with the change it makes: ``approval.request``, the approvers' own calls
(``approval.approve``, ``approval.deny``), ``approval.execute`` (and ``approval.release`` when the
operation then failed), ``approval.expire`` and ``approval.break_glass``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from keymanager.db import Store
from keymanager.db.approvals import ApprovalStore
from keymanager.domain import approvals
from keymanager.domain.approvals import SERVICE, Guarded, Proposal, Request, Rule, RuleError, State, Vote
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Principal
from keymanager.errors import ApprovalPending, Conflict, Forbidden, InvalidRequest, NotFound
from keymanager.services.authorization import Right, holds

MAX_OPEN_PER_REQUESTER = 100
"""Open requests one principal may have at once (a bound on what a stolen credential can pile up)."""
BREAK_GLASS = "break-glass"
"""The principal named in the audit records of the operator's way out (``keymanager approvals``)."""
SYSTEM = "system"


class ApprovalService:
    """Approval rules, requests and the gate of guarded operations."""

    def __init__(self, store: ApprovalStore, principals: Store) -> None:
        self._store = store
        self._principals = principals

    # -- the gate -------------------------------------------------------------

    @contextmanager
    def guard(self, proposal: Proposal, record: AuditEntry | None) -> Iterator[None]:
        """Run the block only when ``proposal`` needs no approval or the requester's approved request for it
        is spent now; otherwise raise ApprovalPending (the block does not run). A call without a record or
        without a principal (the service's own work, ``keymanager`` commands) is not guarded."""
        spent = self.admit(proposal, record)
        if spent is None:
            yield
            return
        try:
            yield
        except BaseException:
            self.release(spent, record)
            raise

    @asynccontextmanager
    async def aguard(self, proposal: Proposal, record: AuditEntry | None) -> AsyncIterator[None]:
        """:meth:`guard` for a coroutine's block (the database work on a worker thread)."""
        spent = await asyncio.to_thread(self.admit, proposal, record)
        try:
            yield
        except BaseException:
            if spent is not None:
                await asyncio.to_thread(self.release, spent, record)
            raise

    def admit(self, proposal: Proposal, record: AuditEntry | None) -> Request | None:
        """The approved request spent for ``proposal`` (None: nothing guards it); ApprovalPending, or
        Conflict when the rule cannot be met (fewer eligible approvers than it asks for)."""
        if record is None or record.principal is None:
            return None
        rule = self.rule_for(proposal)
        if rule is None:
            return None
        requester = self._principals.principal_by_name(record.principal)
        if requester is None:
            raise Forbidden("the requester is not a principal")
        now = datetime.now(UTC)
        digest = proposal.digest(requester.id)
        found = self._store.open_request(requester.id, digest, now)
        if found is not None and found.state is State.APPROVED:
            spent = self._store.move(
                found.id,
                [State.APPROVED],
                State.EXECUTED,
                executed_at=now,
                record=_entry(record, "approval.execute", found),
            )
            if spent:
                return found
        if found is None:
            found = self._request(proposal, rule, requester, digest, now, record)
        raise ApprovalPending(
            found.id, tuple(op.value for op in proposal.operations), found.approvals_required, _iso(found.expires_at)
        )

    def release(self, spent: Request, record: AuditEntry | None) -> None:
        """Make a spent request approved again: its operation failed, so it did not run."""
        self._store.move(spent.id, [State.EXECUTED], State.APPROVED, record=_entry(record, "approval.release", spent))

    def rule_for(self, proposal: Proposal) -> Rule | None:
        """The one rule ``proposal`` obeys (the service's and its key's, the stricter), None: unguarded."""
        sources = [self._store.rules(SERVICE)]
        if proposal.key_id is not None:
            sources.append(self._store.rules(proposal.key_id))
        return approvals.combined(proposal.operations, *sources)

    def _request(
        self, proposal: Proposal, rule: Rule, requester: Principal, digest: str, now: datetime, record: AuditEntry
    ) -> Request:
        available = approvals.eligible(rule, self._admin_ids(), requester.id) & self._existing(rule)
        if len(available) < rule.approvals:
            raise Conflict(
                f"{', '.join(proposal.operations)} needs {rule.approvals} approver(s) other than the requester; "
                f"{len(available)} exist (add approvers, or see break-glass in docs/usage.md)"
            )
        if self._store.open_count(requester.id, now) >= MAX_OPEN_PER_REQUESTER:
            raise Conflict(f"the principal has {MAX_OPEN_PER_REQUESTER} open approval requests: settle some first")
        request = Request(
            id=new_id(),
            proposal=proposal,
            digest=digest,
            requester_id=requester.id,
            requester=requester.name,
            state=State.PENDING,
            approvals_required=rule.approvals,
            approvers=rule.approvers,
            votes=(),
            denial=None,
            created_at=now,
            expires_at=now + timedelta(hours=rule.ttl_hours),
        )
        details = {"operations": [op.value for op in proposal.operations], "approvals_required": rule.approvals}
        self._store.create(request, record=_entry(record, "approval.request", request, **details))
        return request

    # -- approvers --------------------------------------------------------------

    def get(self, request_id: str) -> Request:
        """The request ``request_id`` (marked expired first when its time has passed); NotFound."""
        found = self._store.get(request_id)
        if found is None:
            raise NotFound("approval request not found")
        return self._expired(found)

    def listed(self, state: State | None = None) -> list[Request]:
        """Requests (of ``state``), the newest first; those whose time passed are shown expired."""
        self.expire_due()
        return self._store.listed(state)

    def approve(self, request_id: str, approver: Principal, digest: str, *, record: AuditEntry | None) -> Request:
        """Count ``approver``'s approval of the pending request whose digest is ``digest``; the request after.
        Forbidden: the requester itself, or a principal the rule does not name; Conflict: not pending,
        already approved by this principal, or a digest other than the request's (what was inspected is
        not what would run)."""
        request = self._pending(request_id)
        self._check_approver(request, approver)
        if any(vote.principal_id == approver.id for vote in request.votes):
            raise Conflict("this principal approved the request already: each approver counts once")
        if digest != request.digest:
            raise Conflict("the digest is not the request's: what was inspected is not what would run")
        vote = Vote(approver.id, approver.name, datetime.now(UTC))
        approved = len(request.votes) + 1 >= request.approvals_required
        entry = _with(record, request, approved=approved, votes=len(request.votes) + 1)
        if not self._store.vote(request, vote, approved=approved, record=entry):
            raise Conflict("the request changed meanwhile: read it again")
        return self.get(request_id)

    def deny(self, request_id: str, principal: Principal, reason: str | None, *, record: AuditEntry | None) -> Request:
        """Close the open request unrun: by an eligible approver, or the requester withdrawing it."""
        request = self.get(request_id)
        if request.state not in approvals.OPEN:
            raise Conflict(f"the request is {request.state.value}")
        if principal.id != request.requester_id:
            self._check_approver(request, principal)
        if reason is not None and len(reason) > approvals.MAX_REASON:
            raise InvalidRequest(f"a reason is at most {approvals.MAX_REASON} characters")
        denial = Vote(principal.id, principal.name, datetime.now(UTC), reason)
        if not self._store.move(request.id, approvals.OPEN, State.DENIED, denial=denial, record=_with(record, request)):
            raise Conflict("the request changed meanwhile: read it again")
        return self.get(request_id)

    def expire_due(self, now: datetime | None = None) -> list[str]:
        """Mark expired every open request whose time has passed (each with its record); their ids."""
        moment = now or datetime.now(UTC)
        expired = []
        for request in self._store.due(moment):
            if self._store.move(request.id, approvals.OPEN, State.EXPIRED, record=_system(request, "approval.expire")):
                expired.append(request.id)
        return expired

    def break_glass(self, request_id: str, reason: str) -> Request:
        """The operator's way out when approvers are lost: approve the pending request at once, as
        ``break-glass`` (run on the service's host with its HSM PIN: ``keymanager approvals break-glass``)."""
        request = self._pending(request_id)
        entry = _system(request, "approval.break_glass", principal=BREAK_GLASS, reason=reason[: approvals.MAX_REASON])
        if not self._store.move(request.id, [State.PENDING], State.APPROVED, record=entry):
            raise Conflict("the request changed meanwhile: read it again")
        return self.get(request_id)

    def clear_rules(self, reason: str) -> None:
        """The operator's other way out: remove the service's rules (a key's own rules stay)."""
        entry = AuditEntry(
            time=datetime.now(UTC),
            action="approval.break_glass",
            outcome=Outcome.OK,
            status=200,
            principal=BREAK_GLASS,
            details={"cleared": SERVICE, "reason": reason[: approvals.MAX_REASON]},
        )
        self._store.set_rules(SERVICE, {}, datetime.now(UTC), record=entry)

    def _pending(self, request_id: str) -> Request:
        request = self.get(request_id)
        if request.state is not State.PENDING:
            raise Conflict(f"the request is {request.state.value}, not pending")
        return request

    def _check_approver(self, request: Request, approver: Principal) -> None:
        if approver.id == request.requester_id:
            raise Forbidden("self-approval never counts: another principal must approve the request")
        if request.approvers is None:
            if not holds(approver.role, Right.MANAGE):
                raise Forbidden("only admins approve this request")
        elif approver.id not in request.approvers:
            raise Forbidden("the rule does not name this principal as an approver")

    def _expired(self, request: Request) -> Request:
        if not request.expired(datetime.now(UTC)):
            return request
        self._store.move(request.id, approvals.OPEN, State.EXPIRED, record=_system(request, "approval.expire"))
        return self._store.get(request.id) or request

    def _admin_ids(self) -> set[str]:
        return {p.id for p in self._principals.list_principals() if holds(p.role, Right.MANAGE)}

    def _existing(self, rule: Rule) -> frozenset[str]:
        if rule.approvers is None:
            return frozenset(self._admin_ids())
        return frozenset(self._principals.principal_names(rule.approvers))

    # -- rules ------------------------------------------------------------------

    def shown_rules(self, key_id: str | None = None) -> dict[str, Any]:
        """The rules of the service (or of key ``key_id``), approvers by name."""
        rules = self._store.rules(key_id or SERVICE)
        names = self._principals.principal_names(approvals.named(rules))
        return {op.value: rule.to_dict(names) for op, rule in rules.items()}

    def set_rules(self, data: object, *, key_id: str | None = None, record: AuditEntry | None) -> dict[str, Any]:
        """Replace the rules of the service (or of key ``key_id``) by ``data`` (approvers by name); the rules
        after. InvalidRequest: a malformed rule, an approver that is not an admin or auditor; Conflict: a rule
        asking for more approvers than exist. Guarded itself by ``approval.rules``."""
        try:
            by_name = approvals.parse_rules(data)
        except RuleError as exc:
            raise InvalidRequest(str(exc)) from None
        rules = approvals.translated(by_name, self._approver_ids(approvals.named(by_name)))
        for operation, rule in rules.items():
            available = len(self._existing(rule))
            if available < rule.approvals:
                raise Conflict(f"{operation}: {rule.approvals} approver(s) asked for, {available} eligible exist")
        scope = key_id or SERVICE
        shown = {op.value: rule.to_dict() for op, rule in by_name.items()}
        proposal = Proposal((Guarded.APPROVAL_RULES,), scope, {"rules": shown}, key_id=key_id)
        with self.guard(proposal, record):
            self._store.set_rules(scope, rules, datetime.now(UTC), record=record)
        return self.shown_rules(key_id)

    def _approver_ids(self, names: frozenset[str]) -> dict[str, str]:
        found = {p.name: p for p in self._principals.principals_by_name(names)}
        missing = sorted(names - set(found))
        if missing:
            raise InvalidRequest(f"the rules name approvers that do not exist: {', '.join(missing)[:200]}")
        wrong = sorted(n for n, p in found.items() if not holds(p.role, Right.APPROVE))
        if wrong:
            raise InvalidRequest(f"approvers are admins or auditors: {', '.join(wrong)[:200]}")
        return {name: p.id for name, p in found.items()}


def guarded(
    gate: ApprovalService | None, proposal: Proposal, record: AuditEntry | None
) -> AbstractContextManager[None]:
    """``gate.guard(proposal, record)``, or no guard at all for a service built without one (tests)."""
    return nullcontext() if gate is None else gate.guard(proposal, record)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _entry(record: AuditEntry | None, action: str, request: Request, **details: Any) -> AuditEntry:
    """The record of a step of ``request`` taken in the door's request ``record`` (its principal, request id)."""
    base = record or AuditEntry(time=datetime.now(UTC), action=action, outcome=Outcome.OK, status=200)
    return replace(
        base,
        time=datetime.now(UTC),
        action=action,
        outcome=Outcome.OK,
        status=200,
        key_id=request.proposal.key_id,
        key_version=None,
        details={"approval_request": request.id, "target": request.proposal.target[:64], **details},
    )


def _with(record: AuditEntry | None, request: Request, **details: Any) -> AuditEntry | None:
    """The door's own record of an approver's call, naming the request and its key."""
    if record is None:
        return None
    return replace(
        record,
        key_id=request.proposal.key_id,
        details={**record.details, "approval_request": request.id, **details},
    )


def _system(request: Request, action: str, *, principal: str = SYSTEM, **details: Any) -> AuditEntry:
    return AuditEntry(
        time=datetime.now(UTC),
        action=action,
        outcome=Outcome.OK,
        status=200,
        principal=principal,
        key_id=request.proposal.key_id,
        details={"approval_request": request.id, **details},
    )
