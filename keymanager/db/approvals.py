"""Approval rules and approval requests (dual control, ``domain/approvals.py``).

Every change commits with its audit record (``db/changes.py``), without bumping the metadata version:
no cache holds these rows. A request moves between states by
conditional updates only, so when two processes (or replicas) race — two approvers at once, two
re-sent calls — exactly one wins: a vote counts only against the votes it saw, and an approved
request becomes ``executed`` once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from keymanager.db.changes import record_only, rowcount, sessions
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import ApprovalRequestRow, ApprovalRulesRow
from keymanager.domain.approvals import OPEN, Guarded, Proposal, Request, Rule, Rules, State, Vote
from keymanager.domain.audit import AuditEntry, ChainKey

LIST_LIMIT = 500
"""Most requests one listing returns (the newest first)."""


class ApprovalStore:
    """Approval rules and requests over one engine; safe to share between threads."""

    def __init__(self, engine: Engine, *, audit_key: ChainKey | None = None) -> None:
        self._sessions = sessions(engine, audit_key)

    def rules(self, scope: str) -> dict[Guarded, Rule]:
        """The rules of ``scope`` (``service`` or a key id; approvers by principal id); empty when none."""
        with self._transaction() as session:
            stored = session.scalar(select(ApprovalRulesRow.rules).where(ApprovalRulesRow.scope == scope))
        return _rules(stored or {})

    def set_rules(self, scope: str, rules: Rules, now: datetime, *, record: AuditEntry | None) -> None:
        """Replace the rules of ``scope`` (an empty set removes them), with ``record``."""
        stored = {op.value: rule.to_dict() for op, rule in rules.items()}
        with self._transaction() as session:
            row = session.get(ApprovalRulesRow, scope)
            if not rules:
                if row is not None:
                    session.delete(row)
            elif row is None:
                session.add(ApprovalRulesRow(scope=scope, rules=stored, updated_at=now))
            else:
                row.rules, row.updated_at = stored, now
            record_only(session, record)

    def create(self, request: Request, *, record: AuditEntry | None) -> None:
        """Store a new request (with ``record``)."""
        with self._transaction() as session:
            session.add(_row(request))
            record_only(session, record)

    def get(self, request_id: str) -> Request | None:
        """The request ``request_id``, or None."""
        with self._transaction() as session:
            row = session.get(ApprovalRequestRow, request_id)
            return None if row is None else _request(row)

    def open_request(self, requester_id: str, digest: str, now: datetime) -> Request | None:
        """The requester's open, unexpired request for the proposal of ``digest`` (the oldest), or None."""
        condition = (
            (ApprovalRequestRow.digest == digest)
            & (ApprovalRequestRow.requester_id == requester_id)
            & ApprovalRequestRow.state.in_([s.value for s in OPEN])
            & (ApprovalRequestRow.expires_at > now)
        )
        with self._transaction() as session:
            row = session.scalars(
                select(ApprovalRequestRow).where(condition).order_by(ApprovalRequestRow.created_at).limit(1)
            ).one_or_none()
            return None if row is None else _request(row)

    def open_count(self, requester_id: str, now: datetime) -> int:
        """How many open, unexpired requests ``requester_id`` has."""
        condition = (
            (ApprovalRequestRow.requester_id == requester_id)
            & ApprovalRequestRow.state.in_([s.value for s in OPEN])
            & (ApprovalRequestRow.expires_at > now)
        )
        with self._transaction() as session:
            return int(session.scalar(select(func.count()).select_from(ApprovalRequestRow).where(condition)) or 0)

    def listed(self, state: State | None = None, limit: int = LIST_LIMIT) -> list[Request]:
        """Requests (of ``state``, when given), the newest first, at most ``limit``."""
        statement = select(ApprovalRequestRow).order_by(ApprovalRequestRow.created_at.desc()).limit(limit)
        if state is not None:
            statement = statement.where(ApprovalRequestRow.state == state.value)
        with self._transaction() as session:
            return [_request(row) for row in session.scalars(statement)]

    def vote(self, request: Request, vote: Vote, *, approved: bool, record: AuditEntry | None) -> bool:
        """Add ``vote`` to the pending ``request`` as it was read (and make it approved when ``approved``);
        False, nothing changed, when it moved meanwhile (another vote, a decision, its expiry)."""
        votes = [*map(_vote_dict, request.votes), _vote_dict(vote)]
        values: dict[str, Any] = {"votes": votes, "vote_count": len(votes)}
        if approved:
            values["state"] = State.APPROVED.value
        condition = (
            (ApprovalRequestRow.id == request.id)
            & (ApprovalRequestRow.state == State.PENDING.value)
            & (ApprovalRequestRow.vote_count == len(request.votes))
        )
        return self._move(condition, values, record)

    def move(
        self,
        request_id: str,
        from_states: Sequence[State],
        to_state: State,
        *,
        record: AuditEntry | None,
        denial: Vote | None = None,
        executed_at: datetime | None = None,
    ) -> bool:
        """Move the request from one of ``from_states`` to ``to_state`` (with ``record``); False when it was
        in none of them (someone else moved it first)."""
        values: dict[str, Any] = {"state": to_state.value}
        if denial is not None:
            values["denial"] = _vote_dict(denial)
        if to_state is State.EXECUTED or State.EXECUTED in from_states:
            values["executed_at"] = executed_at
        condition = (ApprovalRequestRow.id == request_id) & ApprovalRequestRow.state.in_([s.value for s in from_states])
        return self._move(condition, values, record)

    def due(self, now: datetime, limit: int = LIST_LIMIT) -> list[Request]:
        """Open requests whose time has passed (the oldest first), at most ``limit``."""
        condition = ApprovalRequestRow.state.in_([s.value for s in OPEN]) & (ApprovalRequestRow.expires_at <= now)
        statement = select(ApprovalRequestRow).where(condition).order_by(ApprovalRequestRow.expires_at).limit(limit)
        with self._transaction() as session:
            return [_request(row) for row in session.scalars(statement)]

    def _move(self, condition: Any, values: dict[str, Any], record: AuditEntry | None) -> bool:
        with self._transaction() as session:
            if not rowcount(session, update(ApprovalRequestRow).where(condition).values(**values)):
                return False
            record_only(session, record)
            return True

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            yield session


def _rules(stored: dict[str, Any]) -> dict[Guarded, Rule]:
    rules = {}
    for name, value in stored.items():
        approvers = value.get("approvers")
        rules[Guarded(name)] = Rule(
            int(value["approvals"]), None if approvers is None else frozenset(approvers), int(value["ttl_hours"])
        )
    return rules


def _vote_dict(vote: Vote) -> dict[str, Any]:
    return {
        "principal_id": vote.principal_id,
        "principal": vote.principal,
        "at": vote.at.isoformat(),
        "reason": vote.reason,
    }


def _vote(stored: dict[str, Any]) -> Vote:
    return Vote(stored["principal_id"], stored["principal"], datetime.fromisoformat(stored["at"]), stored.get("reason"))


def _row(request: Request) -> ApprovalRequestRow:
    proposal = request.proposal
    return ApprovalRequestRow(
        id=request.id,
        operations=[op.value for op in proposal.operations],
        target=proposal.target,
        key_id=proposal.key_id,
        arguments=dict(proposal.arguments),
        digest=request.digest,
        requester_id=request.requester_id,
        requester=request.requester,
        state=request.state.value,
        approvals_required=request.approvals_required,
        approvers=None if request.approvers is None else sorted(request.approvers),
        votes=[_vote_dict(v) for v in request.votes],
        vote_count=len(request.votes),
        denial=None if request.denial is None else _vote_dict(request.denial),
        created_at=request.created_at,
        expires_at=request.expires_at,
        executed_at=request.executed_at,
    )


def _request(row: ApprovalRequestRow) -> Request:
    proposal = Proposal(
        operations=tuple(Guarded(op) for op in row.operations),
        target=row.target,
        arguments=row.arguments,
        key_id=row.key_id,
    )
    return Request(
        id=row.id,
        proposal=proposal,
        digest=row.digest,
        requester_id=row.requester_id,
        requester=row.requester,
        state=State(row.state),
        approvals_required=row.approvals_required,
        approvers=None if row.approvers is None else frozenset(row.approvers),
        votes=tuple(_vote(v) for v in row.votes),
        denial=None if row.denial is None else _vote(row.denial),
        created_at=row.created_at,
        expires_at=row.expires_at,
        executed_at=row.executed_at,
    )
