"""Dual control: the operations that can destroy or leak keys, the rules that guard them, and the
proposal a guarded call becomes.

A guarded call is not run until ``approvals`` distinct principals other than its requester approved
it. What they approve is a :class:`Proposal`: the guarded operations, their target (a key id, a
principal's name, ``service``) and the call's arguments, bound by :meth:`Proposal.digest` (SHA-256
of their canonical JSON, with the requester's id) to what will run. The requester runs it by sending
the same call again: the same arguments give the same digest, so a changed call is another
proposal, never the approved one.

Rules come from two places, the service's and a key's own; :func:`combined` takes the stricter of
every rule that applies (most approvals, the narrowest set of approvers, the shortest life). Rules
name approvers by principal id (as key policies do): a principal made later under a deleted one's
name inherits nothing. This module is pure: no storage, no HSM.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from keymanager.domain.policy import Operation, Policy

MAX_APPROVALS = 10
"""Most approvals a rule may ask for."""
DEFAULT_TTL_HOURS = 24
MAX_TTL_HOURS = 720
"""How long a request stays open by default, and at most (30 days)."""
MAX_APPROVERS = 50
"""Most principals a rule may name as its approvers."""
MAX_REASON = 200
"""Longest reason a denial may give."""
SERVICE = "service"
"""The target of a change of the service's own rules."""


class Guarded(enum.StrEnum):
    """An operation a rule may guard (the same on every door)."""

    KEY_DELETE = "key.delete"
    """Scheduling a key's deletion (REST DELETE, KMS ScheduleKeyDeletion, KMIP Destroy, Transit delete)."""
    KEY_DISABLE = "key.disable"
    """Disabling a key (REST PATCH enabled=false, KMS DisableKey, KMIP Revoke)."""
    KEY_GRANT = "key.grant"
    """A policy change that names someone new for ``decrypt``, ``get_key_material`` or ``sign``."""
    KEY_EXPORT = "key.export"
    """Handing out an exportable key's material (KMIP Get, Transit export)."""
    PRINCIPAL_ADMIN = "principal.admin"
    """Creating a principal of role admin."""
    PRINCIPAL_REMOVE = "principal.remove"
    """Deleting a principal."""
    APPROVAL_RULES = "approval.rules"
    """Changing approval rules (the service's or a key's)."""


GRANTS_GUARDED = (Operation.DECRYPT, Operation.GET_KEY_MATERIAL, Operation.SIGN)
"""The policy operations whose new grantees a ``key.grant`` rule guards: what reads data or keys,
or speaks for the key."""


class RuleError(ValueError):
    """A rule set that cannot be taken as written (the message says why, naming no secret)."""


@dataclass(frozen=True)
class Rule:
    """``approvals`` distinct approvers, from ``approvers`` (principal references; None: any admin),
    within ``ttl_hours`` of the request."""

    approvals: int
    approvers: frozenset[str] | None = None
    ttl_hours: int = DEFAULT_TTL_HOURS

    def to_dict(self, names: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The API / storage shape; approvers translated by ``names`` when given (unknown ones dropped)."""
        approvers = None
        if self.approvers is not None:
            approvers = sorted(self.approvers if names is None else (names[a] for a in self.approvers if a in names))
        return {"approvals": self.approvals, "approvers": approvers, "ttl_hours": self.ttl_hours}


Rules = Mapping[Guarded, Rule]


def parse_rules(data: object) -> dict[Guarded, Rule]:
    """A rule set from its JSON shape ``{operation: {approvals, approvers?, ttl_hours?}}``; RuleError."""
    if not isinstance(data, Mapping):
        raise RuleError("rules must be an object from guarded operation to rule")
    rules = {}
    for name, value in data.items():
        try:
            operation = Guarded(name)
        except ValueError:
            known = ", ".join(g.value for g in Guarded)
            raise RuleError(f"unknown guarded operation {str(name)[:64]!r} (known: {known})") from None
        rules[operation] = _rule(operation, value)
    return rules


def _rule(operation: Guarded, value: object) -> Rule:
    if not isinstance(value, Mapping) or not set(value) <= {"approvals", "approvers", "ttl_hours"}:
        raise RuleError(f"{operation}: a rule is an object with approvals, approvers and ttl_hours")
    approvals, approvers = value.get("approvals"), value.get("approvers")
    ttl = value.get("ttl_hours", DEFAULT_TTL_HOURS)
    if not isinstance(approvals, int) or isinstance(approvals, bool) or not 1 <= approvals <= MAX_APPROVALS:
        raise RuleError(f"{operation}: approvals must be an integer from 1 to {MAX_APPROVALS}")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or not 1 <= ttl <= MAX_TTL_HOURS:
        raise RuleError(f"{operation}: ttl_hours must be an integer from 1 to {MAX_TTL_HOURS}")
    if approvers is not None and (
        not isinstance(approvers, list)
        or not all(isinstance(a, str) and a for a in approvers)
        or len(approvers) > MAX_APPROVERS
    ):
        raise RuleError(f"{operation}: approvers must be a list of at most {MAX_APPROVERS} principal names, or null")
    return Rule(approvals, None if approvers is None else frozenset(approvers), ttl)


def translated(rules: Rules, references: Mapping[str, str]) -> dict[Guarded, Rule]:
    """``rules`` with every approver ``a`` replaced by ``references[a]`` (absent ones dropped)."""
    return {
        op: Rule(
            rule.approvals,
            None if rule.approvers is None else frozenset(references[a] for a in rule.approvers if a in references),
            rule.ttl_hours,
        )
        for op, rule in rules.items()
    }


def named(rules: Rules) -> frozenset[str]:
    """Every approver the rules name."""
    return frozenset().union(*(rule.approvers or frozenset() for rule in rules.values()))


def combined(operations: Iterable[Guarded], *sources: Rules) -> Rule | None:
    """The one rule a call guarded for ``operations`` obeys under every rule set of ``sources``: the most
    approvals, only the approvers every naming rule names, the shortest life; None when nothing guards it."""
    applying = [rules[op] for rules in sources for op in operations if op in rules]
    if not applying:
        return None
    approvers: frozenset[str] | None = None
    for rule in applying:
        if rule.approvers is not None:
            approvers = rule.approvers if approvers is None else approvers & rule.approvers
    return Rule(
        max(rule.approvals for rule in applying),
        approvers,
        min(rule.ttl_hours for rule in applying),
    )


def new_grantees(before: Policy, after: Policy) -> bool:
    """Whether ``after`` names for :data:`GRANTS_GUARDED` a principal ``before`` did not."""
    for operation in GRANTS_GUARDED:
        if after.grants.get(operation, frozenset()) - before.grants.get(operation, frozenset()):
            return True
    return False


@dataclass(frozen=True)
class Proposal:
    """A guarded call as its approvers see it and as it will run."""

    operations: tuple[Guarded, ...]
    target: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    key_id: str | None = None
    """The key whose own rules also apply (None: only the service's)."""

    def digest(self, requester_id: str) -> str:
        """SHA-256 (hex) of the canonical JSON of the operations, target, arguments and requester."""
        document = {
            "operations": sorted(op.value for op in self.operations),
            "target": self.target,
            "arguments": self.arguments,
            "requester": requester_id,
        }
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()


def guarded_update(
    *, was_enabled: bool, enabled: bool | None, before: Policy, after: Policy | None
) -> tuple[Guarded, ...]:
    """The guarded operations of one change of a key (its enabled flag, its policy)."""
    found = []
    if enabled is False and was_enabled:
        found.append(Guarded.KEY_DISABLE)
    if after is not None and new_grantees(before, after):
        found.append(Guarded.KEY_GRANT)
    return tuple(found)


def eligible(rule: Rule, admins: Collection[str], requester: str) -> frozenset[str]:
    """The principals who may approve under ``rule`` (its named approvers, else ``admins``), the requester never."""
    pool = frozenset(admins) if rule.approvers is None else rule.approvers
    return pool - {requester}


class State(enum.StrEnum):
    """Where a request is: ``pending`` its approvals, ``approved`` (its call may run once), ``denied``,
    ``executed``, ``expired``. Only ``pending`` and ``approved`` are open."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXECUTED = "executed"
    EXPIRED = "expired"


OPEN = (State.PENDING, State.APPROVED)


@dataclass(frozen=True)
class Vote:
    """One approval (or the denial): by whom (id and name then), when, and a denial's reason."""

    principal_id: str
    principal: str
    at: datetime
    reason: str | None = None


@dataclass(frozen=True)
class Request:
    """A stored approval request."""

    id: str
    proposal: Proposal
    digest: str
    requester_id: str
    requester: str
    state: State
    approvals_required: int
    approvers: frozenset[str] | None
    """The principals (ids) who may approve; None: any admin but the requester."""
    votes: tuple[Vote, ...]
    denial: Vote | None
    created_at: datetime
    expires_at: datetime
    executed_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        """Whether the request is still marked open but its time has passed."""
        return self.state in OPEN and now >= self.expires_at
