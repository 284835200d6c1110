"""Dual control end to end through the SDK and kmctl (issue 40), on the session's server: a key's own
rules (the shared server's other tests see no rule of the service), two admins, the requester's SDK
raising ApprovalPending and kmctl exiting 4, the approver's ``kmctl approvals show|approve``, then the
same command run again."""

from __future__ import annotations

import json

import pytest
from keymanager_sdk import ApprovalPending, ApprovalRule, KeyManager

from tests.e2e.conftest import Server, keymanager
from tests.sdk.conftest import unique
from tests.sdk.test_kmctl import kmctl


@pytest.fixture(scope="module")
def second_admin(admin: KeyManager) -> str:
    return admin.create_principal(unique("approver"), "admin").token


def test_the_sdk_raises_approval_pending_and_the_same_call_runs_once_approved(
    server: Server, admin: KeyManager, second_admin: str
) -> None:
    key = admin.create_key(unique("dual-sdk"), policy={})
    admin.set_approval_rules({"key.disable": ApprovalRule(approvals=1)}, key=key.name)
    with pytest.raises(ApprovalPending) as pending:
        admin.disable_key(key.name)
    assert pending.value.operations == ("key.disable",) and pending.value.approvals_required == 1
    assert admin.get_key(key.name).state == "enabled"
    with KeyManager(server.url, token=second_admin, ca=str(server.ca)) as approver:
        request = approver.get_approval(pending.value.request_id)
        assert request.requester == "admin" and request.state == "pending"
        assert approver.approve(request.id, request.digest).state == "approved"
    assert admin.disable_key(key.name).state == "disabled"
    assert admin.get_approval(pending.value.request_id).state == "executed"


def test_kmctl_two_admins(server: Server, admin: KeyManager, second_admin: str) -> None:
    key = admin.create_key(unique("dual-kmctl"), policy={})
    rules = json.dumps({"key.delete": {"approvals": 1}})
    assert kmctl(server, "approvals", "rules", "set", rules, "--key", key.name).returncode == 0
    asked = kmctl(server, "keys", "delete", key.name, "--pending-days", "7")
    assert asked.returncode == 4, asked
    request_id = asked.stderr.decode().split("request ")[1].split()[0].strip(" (;,.:")
    assert len(request_id) == 32, asked.stderr
    assert kmctl(server, "approvals", "approve", request_id).returncode == 1  # self-approval is refused
    shown = kmctl(server, "approvals", "show", request_id, token=second_admin)
    assert shown.returncode == 0 and b"key.delete" in shown.stdout, shown
    approved = kmctl(server, "approvals", "approve", request_id, token=second_admin)
    assert approved.returncode == 0, approved
    assert kmctl(server, "keys", "delete", key.name, "--pending-days", "7").returncode == 0
    assert admin.get_key(key.name).state == "pending_deletion"


def test_break_glass_on_the_host_approves_and_is_audited(server: Server, admin: KeyManager) -> None:
    key = admin.create_key(unique("dual-glass"), policy={})
    admin.set_approval_rules({"key.delete": ApprovalRule(approvals=1)}, key=key.name)  # no approver will answer
    with pytest.raises(ApprovalPending) as pending:
        admin.schedule_key_deletion(key.name, pending_days=7)
    request_id = pending.value.request_id
    home = server.var_dir.parent
    refused = keymanager("approvals", "break-glass", "f" * 32, "--reason", "no such request", env=server.env, cwd=home)
    assert refused.returncode == 1 and "not found" in refused.stderr, refused
    glass = keymanager("approvals", "break-glass", request_id, "--reason", "approvers lost", env=server.env, cwd=home)
    assert glass.returncode == 0, glass.stderr
    assert admin.schedule_key_deletion(key.name, pending_days=7).state == "pending_deletion"
    records = [r.details or {} for r in admin.audit(action="approval.break_glass", newest_first=True)]
    assert {"approval_request": request_id, "reason": "approvers lost"}.items() <= next(
        (d for d in records if d.get("approval_request") == request_id), {}
    ).items()
