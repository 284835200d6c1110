"""Approval rules and requests on SQLite and PostgreSQL (issue 40): rules round-trip by scope; a
request's votes count only against the votes they saw, an approved request is executed once; no change
bumps the metadata version (no cache holds these rows)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from keymanager.db import Store
from keymanager.db.approvals import ApprovalStore
from keymanager.domain.approvals import Guarded, Proposal, Request, Rule, State, Vote


def a_request(now: datetime, requester: str = "r" * 32, hours: int = 24) -> Request:
    proposal = Proposal((Guarded.KEY_DELETE,), "k" * 32, {"pending_days": 7, "policy": {"decrypt": ["x"]}}, "k" * 32)
    return Request(
        id=f"{int(now.timestamp() * 1e6):032x}"[-32:],
        proposal=proposal,
        digest=proposal.digest(requester),
        requester_id=requester,
        requester="alice",
        state=State.PENDING,
        approvals_required=2,
        approvers=None,
        votes=(),
        denial=None,
        created_at=now,
        expires_at=now + timedelta(hours=hours),
    )


def test_rules_round_trip_by_scope_without_a_metadata_bump(engine: Engine, store: Store) -> None:
    approvals = ApprovalStore(engine)
    version = store.metadata_version()
    rules = {Guarded.KEY_DELETE: Rule(2, frozenset({"a" * 32}), 4), Guarded.KEY_EXPORT: Rule(1)}
    approvals.set_rules("service", rules, datetime.now(UTC), record=None)
    approvals.set_rules("k" * 32, {Guarded.KEY_DISABLE: Rule(3)}, datetime.now(UTC), record=None)
    assert approvals.rules("service") == rules and approvals.rules("k" * 32) == {Guarded.KEY_DISABLE: Rule(3)}
    approvals.set_rules("service", {}, datetime.now(UTC), record=None)
    assert approvals.rules("service") == {} and store.metadata_version() == version


def test_votes_count_once_against_what_they_saw_and_execution_happens_once(engine: Engine) -> None:
    approvals, now = ApprovalStore(engine), datetime.now(UTC)
    request = a_request(now)
    approvals.create(request, record=None)
    assert approvals.open_request(request.requester_id, request.digest, now) == request
    first = Vote("b" * 32, "bob", now)
    assert approvals.vote(request, first, approved=False, record=None)
    assert not approvals.vote(request, Vote("c" * 32, "carol", now), approved=True, record=None)  # stale read
    seen = approvals.get(request.id)
    assert seen is not None and seen.votes == (first,)
    assert approvals.vote(seen, Vote("c" * 32, "carol", now), approved=True, record=None)
    assert approvals.get(request.id).state is State.APPROVED  # type: ignore[union-attr]
    assert approvals.move(request.id, [State.APPROVED], State.EXECUTED, executed_at=now, record=None)
    assert not approvals.move(request.id, [State.APPROVED], State.EXECUTED, executed_at=now, record=None)
    assert approvals.open_request(request.requester_id, request.digest, now) is None
    executed = approvals.get(request.id)
    assert executed is not None and executed.executed_at is not None and executed.proposal == request.proposal


def test_due_requests_and_open_counts(engine: Engine) -> None:
    approvals, now = ApprovalStore(engine), datetime.now(UTC)
    late = a_request(now - timedelta(hours=2), hours=1)
    fresh = a_request(now)
    approvals.create(late, record=None)
    approvals.create(fresh, record=None)
    assert [r.id for r in approvals.due(now)] == [late.id]
    assert approvals.open_count(fresh.requester_id, now) == 1
    assert [r.id for r in approvals.listed(State.PENDING)] == [fresh.id, late.id]
