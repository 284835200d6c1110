"""Dual control: approval requests and approval rules (admin), the calls, and the methods both clients inherit.

A guarded operation (``GUARDED_OPERATIONS``: deleting or disabling a key, granting ``decrypt``,
``sign`` or ``get_key_material``, exporting, creating an admin, removing a principal, changing the
rules) that the rules say needs approvals is not run: its call raises ``ApprovalPending``, and the
service keeps it as an approval request. Other admins (the rule's ``approvers``, any admin when
None; never the requester) inspect it and approve it or deny it::

    try:
        admin.schedule_key_deletion("cards")
    except ApprovalPending as pending:
        request_id = pending.request_id                  # hand it to an approver
    request = other_admin.get_approval(request_id)       # what will run: operations, target, arguments
    other_admin.approve(request.id, request.digest)      # the digest of what was inspected
    admin.schedule_key_deletion("cards")                 # approved: the same call now runs, once

``approve`` sends the ``digest`` (SHA-256 of the held call) its caller inspected: the service
refuses it (``Conflict``) when it is not the request's, so nobody approves a call they did not
see. Self-approval and approvers the rule does not name are ``Forbidden``; approving twice, or a
request no longer pending, ``Conflict``. Rules are the service's (``get_approval_rules()``) and a
key's own (``get_approval_rules(key=…)``); for a key both apply, the stricter winning. Approving,
denying and setting rules are never retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from keymanager_sdk._core import Call, _json_parser, _path

T = TypeVar("T")

GUARDED_OPERATIONS = (
    "key.delete",
    "key.disable",
    "key.grant",
    "key.export",
    "principal.admin",
    "principal.remove",
    "approval.rules",
)
"""The operations approval rules may guard (the keys of a rules mapping)."""
APPROVAL_STATES = ("pending", "approved", "denied", "executed", "expired")
"""The states of an approval request (``list_approvals(state=…)``)."""
DEFAULT_TTL_HOURS = 24
"""How long a request waits for its approvals when a rule does not say (1-720 hours)."""
DENIAL_REASON_MAX = 200
"""The longest ``reason`` the service takes for a denial (characters)."""


def _time(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


@dataclass(frozen=True)
class ApprovalVote:
    """One approval of a request: who approved it, and when."""

    principal: str
    at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalVote:
        return cls(str(data["principal"]), _time(data["at"]))


@dataclass(frozen=True)
class ApprovalDenial:
    """The denial that ended a request: who denied it, when, and why (None when not said)."""

    principal: str
    at: datetime
    reason: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalDenial:
        reason = data.get("reason")
        return cls(str(data["principal"]), _time(data["at"]), None if reason is None else str(reason))


@dataclass(frozen=True)
class Approval:
    """An approval request: a guarded call held until ``approvals_required`` approvers approve it.

    ``target`` is the key id, the principal name or ``"service"`` the call acts on; ``arguments``
    what it would do; ``digest`` the SHA-256 (hex) of the held call, what ``approve`` must send.
    ``state``: ``pending``, ``approved`` (the requester may now send the call again), ``denied``,
    ``executed`` (the call ran, at ``executed_at``) or ``expired``.
    """

    id: str
    operations: tuple[str, ...]
    target: str
    arguments: Mapping[str, Any]
    digest: str
    requester: str
    state: str
    approvals_required: int
    approvals: tuple[ApprovalVote, ...]
    denial: ApprovalDenial | None
    created_at: datetime
    expires_at: datetime
    executed_at: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Approval:
        denial, executed = data.get("denial"), data.get("executed_at")
        return cls(
            id=str(data["id"]),
            operations=tuple(str(op) for op in data["operations"]),
            target=str(data["target"]),
            arguments=dict(data.get("arguments") or {}),
            digest=str(data["digest"]),
            requester=str(data["requester"]),
            state=str(data["state"]),
            approvals_required=int(data["approvals_required"]),
            approvals=tuple(ApprovalVote.from_json(v) for v in data.get("approvals") or ()),
            denial=None if denial is None else ApprovalDenial.from_json(denial),
            created_at=_time(data["created_at"]),
            expires_at=_time(data["expires_at"]),
            executed_at=None if executed is None else _time(executed),
        )


@dataclass(frozen=True)
class ApprovalRule:
    """What a guarded operation needs: ``approvals`` (≥ 1) approvals from ``approvers`` (principal
    names; None: any admin), within ``ttl_hours`` (1-720) of the request. The requester never counts."""

    approvals: int
    approvers: tuple[str, ...] | None = None
    ttl_hours: int = DEFAULT_TTL_HOURS

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalRule:
        approvers = data.get("approvers")
        return cls(
            approvals=int(data["approvals"]),
            approvers=None if approvers is None else tuple(str(name) for name in approvers),
            ttl_hours=int(data.get("ttl_hours", DEFAULT_TTL_HOURS)),
        )

    def to_json(self) -> dict[str, Any]:
        """The API shape (``approvers`` null for any admin)."""
        approvers = None if self.approvers is None else list(self.approvers)
        return {"approvals": self.approvals, "approvers": approvers, "ttl_hours": self.ttl_hours}


ApprovalRuleArg = Mapping[str, ApprovalRule | Mapping[str, Any]]
"""Rules as ``set_approval_rules`` takes them: by guarded operation, an ``ApprovalRule`` or the API's mapping."""


def rules_of(data: Mapping[str, Any]) -> dict[str, ApprovalRule]:
    """The rules of a ``{"rules": {operation: rule}}`` answer."""
    return {str(operation): ApprovalRule.from_json(rule) for operation, rule in data["rules"].items()}


def rules_json(rules: ApprovalRuleArg) -> dict[str, Any]:
    """Rules given as ``ApprovalRule`` or as the API's mappings, in the API shape (mappings as they are)."""
    return {op: rule.to_json() if isinstance(rule, ApprovalRule) else dict(rule) for op, rule in rules.items()}


def list_approvals_call(state: str | None) -> Call[list[Approval]]:
    parse = _json_parser(lambda data: [Approval.from_json(item) for item in data])
    params = None if state is None else {"state": state}
    return Call("GET", "/v1/approvals", parse, params=params, retryable=True)


def get_approval_call(request_id: str) -> Call[Approval]:
    return Call("GET", _path("approvals", request_id), _json_parser(Approval.from_json), retryable=True)


def approve_call(request_id: str, digest: str) -> Call[Approval]:
    path = _path("approvals", request_id, "approve")
    return Call("POST", path, _json_parser(Approval.from_json), json={"digest": digest})


def deny_call(request_id: str, reason: str | None) -> Call[Approval]:
    path = _path("approvals", request_id, "deny")
    return Call("POST", path, _json_parser(Approval.from_json), json={"reason": reason})


def _rules_path(key: str | None) -> str:
    return "/v1/approvals/rules" if key is None else _path("keys", key, "approval-rules")


def get_approval_rules_call(key: str | None) -> Call[dict[str, ApprovalRule]]:
    return Call("GET", _rules_path(key), _json_parser(rules_of), retryable=True, key=key)


def set_approval_rules_call(rules: ApprovalRuleArg, key: str | None) -> Call[dict[str, ApprovalRule]]:
    body = {"rules": rules_json(rules)}
    return Call("PUT", _rules_path(key), _json_parser(rules_of), json=body, key=key)


class ApprovalMethods:
    """Dual-control methods of :class:`~keymanager_sdk.KeyManager` (admin)."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    def list_approvals(self, state: str | None = None) -> list[Approval]:
        """The approval requests, or those in ``state`` (one of ``APPROVAL_STATES``)."""
        return self._run(list_approvals_call(state))

    def get_approval(self, request_id: str) -> Approval:
        """One approval request (``ApprovalPending.request_id``); ``NotFound`` when there is none."""
        return self._run(get_approval_call(request_id))

    def approve(self, request_id: str, digest: str) -> Approval:
        """Approve a request whose call has the ``digest`` you inspected (``Approval.digest``); the request after.

        ``Forbidden``: your own request, or you are not among its approvers. ``Conflict``: already
        approved by you, no longer pending, expired, or ``digest`` is not the request's. Never retried.
        """
        return self._run(approve_call(request_id, digest))

    def deny(self, request_id: str, reason: str | None = None) -> Approval:
        """Deny a pending request (``reason``: at most 200 characters); it can no longer run. Never retried."""
        return self._run(deny_call(request_id, reason))

    def get_approval_rules(self, key: str | None = None) -> dict[str, ApprovalRule]:
        """The service's rules by guarded operation, or ``key``'s own (which apply with the service's)."""
        return self._run(get_approval_rules_call(key))

    def set_approval_rules(self, rules: ApprovalRuleArg, key: str | None = None) -> dict[str, ApprovalRule]:
        """Replace the service's rules (or ``key``'s own) with ``rules`` (``ApprovalRule`` or API mappings);
        the rules after. ``ApprovalPending`` when changing rules is itself guarded. Never retried."""
        return self._run(set_approval_rules_call(rules, key))


class AsyncApprovalMethods:
    """Dual-control methods of :class:`~keymanager_sdk.AsyncKeyManager` (as :class:`ApprovalMethods`, awaited)."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    async def list_approvals(self, state: str | None = None) -> list[Approval]:
        """The approval requests, or those in ``state``."""
        return await self._run(list_approvals_call(state))

    async def get_approval(self, request_id: str) -> Approval:
        """One approval request; ``NotFound`` when there is none."""
        return await self._run(get_approval_call(request_id))

    async def approve(self, request_id: str, digest: str) -> Approval:
        """Approve a request whose call has the ``digest`` you inspected; the request after. Never retried."""
        return await self._run(approve_call(request_id, digest))

    async def deny(self, request_id: str, reason: str | None = None) -> Approval:
        """Deny a pending request; it can no longer run. Never retried."""
        return await self._run(deny_call(request_id, reason))

    async def get_approval_rules(self, key: str | None = None) -> dict[str, ApprovalRule]:
        """The service's rules by guarded operation, or ``key``'s own."""
        return await self._run(get_approval_rules_call(key))

    async def set_approval_rules(self, rules: ApprovalRuleArg, key: str | None = None) -> dict[str, ApprovalRule]:
        """Replace the service's rules (or ``key``'s own); the rules after. Never retried."""
        return await self._run(set_approval_rules_call(rules, key))
