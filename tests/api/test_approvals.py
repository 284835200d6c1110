"""Dual control over REST (issue 40): every guarded operation answers 202 with a pending request and
does not run; approvers inspect it and approve it by its digest; the requester's same call then runs
once. Self-approval, a second approval by one principal, a changed call, a changed digest, replay,
expiry and denial never run anything; every step is in the sealed audit chain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.services.container import Services
from tests.api.support import assert_error
from tests.conftest import auth


@pytest.fixture
def admins(client: TestClient, admin_token: str) -> dict[str, str]:
    """Three admins (``admin``, ``alice``, ``bob``) and an app ``billing``: name to token."""
    tokens = {"admin": admin_token}
    for name, role in (("alice", "admin"), ("bob", "admin"), ("billing", "app"), ("carol", "auditor")):
        made = client.post("/v1/principals", json={"name": name, "role": role}, headers=auth(admin_token))
        assert made.status_code == 201, made.text
        tokens[name] = made.json()["token"]
    return tokens


def rules(client: TestClient, token: str, body: dict[str, Any], key: str | None = None) -> Any:
    path = "/v1/approvals/rules" if key is None else f"/v1/keys/{key}/approval-rules"
    return client.put(path, json={"rules": body}, headers=auth(token))


def make_key(client: TestClient, token: str, name: str = "cards") -> Any:
    made = client.post("/v1/keys", json={"name": name, "policy": {"encrypt": ["billing"]}}, headers=auth(token))
    assert made.status_code == 201, made.text
    return made.json()


def pending(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["status"] == "pending_approval" and len(body["request_id"]) == 32, body
    assert answer.headers["Location"] == f"/v1/approvals/{body['request_id']}"
    return dict(body)


def approve(client: TestClient, token: str, request_id: str, digest: str | None = None) -> Any:
    if digest is None:
        digest = client.get(f"/v1/approvals/{request_id}", headers=auth(token)).json()["digest"]
    return client.post(f"/v1/approvals/{request_id}/approve", json={"digest": digest}, headers=auth(token))


GUARDED_CALLS = {
    "key.delete": ("DELETE", "/v1/keys/cards", None),
    "key.disable": ("PATCH", "/v1/keys/cards", {"enabled": False}),
    "key.grant": ("PATCH", "/v1/keys/cards", {"policy": {"encrypt": ["billing"], "decrypt": ["billing"]}}),
    "principal.admin": ("POST", "/v1/principals", {"name": "dave", "role": "admin"}),
    "principal.remove": ("DELETE", "/v1/principals/billing", None),
}


def call(client: TestClient, token: str, operation: str) -> Any:
    method, path, body = GUARDED_CALLS[operation]
    return client.request(method, path, json=body, headers=auth(token))


def ran(client: TestClient, token: str, operation: str) -> bool:
    """Whether the guarded call of ``operation`` took effect."""
    key = client.get("/v1/keys/cards", headers=auth(token)).json()
    names = {p["name"] for p in client.get("/v1/principals", headers=auth(token)).json()}
    return {
        "key.delete": key["state"] == "pending_deletion",
        "key.disable": key["state"] == "disabled",
        "key.grant": key["policy"]["decrypt"] == ["billing"],
        "principal.admin": "dave" in names,
        "principal.remove": "billing" not in names,
    }[operation]


@pytest.mark.parametrize("operation", sorted(GUARDED_CALLS))
def test_a_guarded_call_runs_only_after_its_approvals_and_once(
    client: TestClient, admins: dict[str, str], operation: str
) -> None:
    make_key(client, admins["admin"])
    assert rules(client, admins["admin"], {operation: {"approvals": 2}}).status_code == 200
    first = pending(call(client, admins["admin"], operation))
    assert first["operations"] == [operation] and first["approvals_required"] == 2
    assert not ran(client, admins["admin"], operation)
    again = pending(call(client, admins["admin"], operation))  # the same call: the same request, no new one
    assert again["request_id"] == first["request_id"]

    request_id = first["request_id"]
    shown = client.get(f"/v1/approvals/{request_id}", headers=auth(admins["alice"])).json()
    assert shown["requester"] == "admin" and shown["state"] == "pending" and shown["operations"] == [operation]
    assert_error(approve(client, admins["admin"], request_id), 403, "forbidden")  # self-approval never counts
    assert approve(client, admins["alice"], request_id).json()["state"] == "pending"
    assert_error(approve(client, admins["alice"], request_id), 409, "conflict")  # one principal counts once
    pending(call(client, admins["admin"], operation))  # one approval of two: still not run
    assert not ran(client, admins["admin"], operation)
    assert approve(client, admins["bob"], request_id).json()["state"] == "approved"

    done = call(client, admins["admin"], operation)
    assert done.status_code in (200, 201, 204), done.text
    assert ran(client, admins["admin"], operation)
    after = client.get(f"/v1/approvals/{request_id}", headers=auth(admins["alice"])).json()
    assert after["state"] == "executed" and after["executed_at"] is not None
    assert [v["principal"] for v in after["approvals"]] == ["alice", "bob"]


def test_another_principal_cannot_run_an_approved_request(client: TestClient, admins: dict[str, str]) -> None:
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.delete": {"approvals": 1}})
    request_id = pending(call(client, admins["admin"], "key.delete"))["request_id"]
    assert approve(client, admins["alice"], request_id).status_code == 200
    theirs = pending(call(client, admins["bob"], "key.delete"))  # bob's own call is bob's own request
    assert theirs["request_id"] != request_id
    assert not ran(client, admins["admin"], "key.delete")


def test_a_changed_call_is_not_the_approved_one_and_replay_runs_nothing(
    client: TestClient, admins: dict[str, str]
) -> None:
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.delete": {"approvals": 1}})
    request_id = pending(client.delete("/v1/keys/cards?pending_days=30", headers=auth(admins["admin"])))["request_id"]
    approve(client, admins["alice"], request_id)
    changed = pending(client.delete("/v1/keys/cards?pending_days=7", headers=auth(admins["admin"])))
    assert changed["request_id"] != request_id  # other arguments: another request, the approved one unspent
    assert client.get("/v1/keys/cards", headers=auth(admins["admin"])).json()["state"] == "enabled"
    assert client.delete("/v1/keys/cards?pending_days=30", headers=auth(admins["admin"])).status_code == 200
    client.post("/v1/keys/cards/cancel-deletion", headers=auth(admins["admin"]))
    replay = pending(client.delete("/v1/keys/cards?pending_days=30", headers=auth(admins["admin"])))
    assert replay["request_id"] not in (request_id, changed["request_id"])  # executed once: a new request
    assert client.get("/v1/keys/cards", headers=auth(admins["admin"])).json()["state"] == "disabled"


def test_an_approval_of_another_digest_is_refused(client: TestClient, admins: dict[str, str]) -> None:
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.delete": {"approvals": 1}})
    request_id = pending(call(client, admins["admin"], "key.delete"))["request_id"]
    assert_error(approve(client, admins["alice"], request_id, "0" * 64), 409, "conflict")
    assert client.get(f"/v1/approvals/{request_id}", headers=auth(admins["alice"])).json()["state"] == "pending"


def test_denied_and_expired_requests_never_run(client: TestClient, services: Services, admins: dict[str, str]) -> None:
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.disable": {"approvals": 1}, "key.delete": {"approvals": 1}})
    denied = pending(call(client, admins["admin"], "key.disable"))["request_id"]
    answer = client.post(f"/v1/approvals/{denied}/deny", json={"reason": "not today"}, headers=auth(admins["bob"]))
    assert answer.json()["state"] == "denied" and answer.json()["denial"]["reason"] == "not today"
    assert_error(approve(client, admins["alice"], denied), 409, "conflict")
    assert pending(call(client, admins["admin"], "key.disable"))["request_id"] != denied

    late = pending(call(client, admins["admin"], "key.delete"))["request_id"]
    approve(client, admins["alice"], late)
    assert late in services.approvals.expire_due(datetime.now(UTC) + timedelta(hours=25))
    assert client.get(f"/v1/approvals/{late}", headers=auth(admins["alice"])).json()["state"] == "expired"
    assert pending(call(client, admins["admin"], "key.delete"))["request_id"] != late
    assert not ran(client, admins["admin"], "key.delete")


def test_rules_need_enough_approvers_and_guard_their_own_change(client: TestClient, admins: dict[str, str]) -> None:
    too_many = rules(client, admins["admin"], {"key.delete": {"approvals": 5}})
    assert_error(too_many, 409, "conflict")
    unknown = rules(client, admins["admin"], {"key.destroy_everything": {"approvals": 1}})
    assert_error(unknown, 400, "invalid_request")
    app_approver = rules(client, admins["admin"], {"key.delete": {"approvals": 1, "approvers": ["billing"]}})
    assert_error(app_approver, 400, "invalid_request")
    named = {"key.delete": {"approvals": 1, "approvers": ["carol"]}, "approval.rules": {"approvals": 1}}
    assert rules(client, admins["admin"], named).json()["rules"]["key.delete"]["approvers"] == ["carol"]

    weaker = pending(rules(client, admins["admin"], {}))  # changing the rules is itself guarded
    assert client.get("/v1/approvals/rules", headers=auth(admins["carol"])).json()["rules"] != {}
    approve(client, admins["alice"], weaker["request_id"])
    assert rules(client, admins["admin"], {}).json()["rules"] == {}


def test_named_approvers_alone_count(client: TestClient, admins: dict[str, str]) -> None:
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.delete": {"approvals": 1, "approvers": ["carol"]}})
    request_id = pending(call(client, admins["admin"], "key.delete"))["request_id"]
    assert_error(approve(client, admins["alice"], request_id), 403, "forbidden")
    assert approve(client, admins["carol"], request_id).json()["state"] == "approved"  # an auditor, named
    assert call(client, admins["admin"], "key.delete").status_code == 200


def test_a_keys_own_rules_add_to_the_services(client: TestClient, admins: dict[str, str]) -> None:
    make_key(client, admins["admin"])
    make_key(client, admins["admin"], "other")
    assert rules(client, admins["admin"], {"key.delete": {"approvals": 2}}, key="cards").status_code == 200
    assert client.get("/v1/keys/cards/approval-rules", headers=auth(admins["admin"])).json()["rules"] == {
        "key.delete": {"approvals": 2, "approvers": None, "ttl_hours": 24}
    }
    assert pending(call(client, admins["admin"], "key.delete"))["approvals_required"] == 2
    assert client.delete("/v1/keys/other", headers=auth(admins["admin"])).status_code == 200  # unguarded


def test_approvers_are_admins_and_apps_see_nothing(client: TestClient, admins: dict[str, str]) -> None:
    assert_error(client.get("/v1/approvals", headers=auth(admins["billing"])), 403, "forbidden")
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.delete": {"approvals": 1}})
    request_id = pending(call(client, admins["admin"], "key.delete"))["request_id"]
    assert_error(approve(client, admins["carol"], request_id), 403, "forbidden")  # an auditor not named
    listed = client.get("/v1/approvals?state=pending", headers=auth(admins["carol"])).json()
    assert [r["id"] for r in listed] == [request_id]
    assert_error(client.get("/v1/approvals/" + "f" * 32, headers=auth(admins["admin"])), 404, "not_found")


def test_every_step_is_in_the_sealed_chain(client: TestClient, services: Services, admins: dict[str, str]) -> None:
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.delete": {"approvals": 1}})
    request_id = pending(call(client, admins["admin"], "key.delete"))["request_id"]
    approve(client, admins["alice"], request_id)
    assert call(client, admins["admin"], "key.delete").status_code == 200
    records = client.get("/v1/audit?limit=200", headers=auth(admins["admin"])).json()["records"]
    steps = [(r["action"], r["principal"]) for r in records if r["details"].get("approval_request") == request_id]
    assert ("approval.request", "admin") in steps
    assert ("approval.approve", "alice") in steps
    assert ("approval.execute", "admin") in steps
    assert ("key.schedule_deletion", "admin") in steps  # the guarded call's own record names the request
    assert client.get("/v1/audit/verify", headers=auth(admins["admin"])).json()["ok"] is True


def test_break_glass_approves_when_approvers_are_lost(
    client: TestClient, services: Services, admins: dict[str, str]
) -> None:
    make_key(client, admins["admin"])
    rules(client, admins["admin"], {"key.delete": {"approvals": 2}})
    request_id = pending(call(client, admins["admin"], "key.delete"))["request_id"]
    assert services.approvals.break_glass(request_id, "two approvers left the company").state.value == "approved"
    assert call(client, admins["admin"], "key.delete").status_code == 200
    services.approvals.clear_rules("rules reset by the operator")
    assert client.get("/v1/approvals/rules", headers=auth(admins["admin"])).json()["rules"] == {}
    records = client.get("/v1/audit?limit=200", headers=auth(admins["admin"])).json()["records"]
    glass = [r for r in records if r["action"] == "approval.break_glass"]
    assert len(glass) == 2 and {r["principal"] for r in glass} == {"break-glass"}
    assert client.get("/v1/audit/verify", headers=auth(admins["admin"])).json()["ok"] is True
