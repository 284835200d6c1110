"""Dual control in the SDK and kmctl against the approval routes' fixed shapes, with
``httpx.MockTransport`` (no sockets): a 202 ``pending_approval`` on any call is ``ApprovalPending``
(sync, async, streams), what each approval method sends and how it reads the answer, and what
``kmctl approvals`` sends, prints and exits with. The service's side is tested by its own suites."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import keymanager_sdk as km
import pytest

from tests.sdk.test_core import KEY_JSON, Recorder, client, error
from tests.sdk.test_kmctl_asymmetric_core import run

REQUEST_ID = "0123456789abcdef0123456789abcdef"
DIGEST = "ab" * 32
EXPIRES = "2030-01-02T03:04:05+00:00"
APPROVAL_JSON: dict[str, Any] = {
    "id": REQUEST_ID,
    "operations": ["key.delete"],
    "target": "k1",
    "arguments": {"pending_days": 7},
    "digest": DIGEST,
    "requester": "alice",
    "state": "pending",
    "approvals_required": 2,
    "approvals": [{"principal": "bob", "at": "2030-01-01T10:00:00+00:00"}],
    "denial": None,
    "created_at": "2030-01-01T09:00:00+00:00",
    "expires_at": EXPIRES,
    "executed_at": None,
}
RULES_JSON = {
    "rules": {
        "key.delete": {"approvals": 2, "approvers": None, "ttl_hours": 24},
        "principal.admin": {"approvals": 1, "approvers": ["bob", "carol"], "ttl_hours": 48},
    }
}


def pending(operations: tuple[str, ...] = ("key.delete",)) -> httpx.Response:
    body = {
        "status": "pending_approval",
        "request_id": REQUEST_ID,
        "operations": list(operations),
        "approvals_required": 2,
        "expires_at": EXPIRES,
    }
    return httpx.Response(202, json=body, headers={"Location": f"/v1/approvals/{REQUEST_ID}"})


def approval(**changes: Any) -> httpx.Response:
    return httpx.Response(200, json={**APPROVAL_JSON, **changes})


def sent(recorder: Recorder, index: int = 0) -> tuple[str, str, Any]:
    """Method, path with query, and JSON body (None without one) of request ``index``."""
    request = recorder.requests[index]
    target = request.url.raw_path.decode()
    return request.method, target, json.loads(request.content) if request.content else None


# --- a call held for approval ------------------------------------------------------------------


def test_a_pending_answer_is_approval_pending_with_its_fields() -> None:
    recorder = Recorder(pending())
    with client(recorder) as c, pytest.raises(km.ApprovalPending) as held:
        c.schedule_key_deletion("cards", 7)
    exc = held.value
    assert (exc.request_id, exc.operations, exc.approvals_required) == (REQUEST_ID, ("key.delete",), 2)
    assert exc.expires_at == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (exc.key, exc.principal) == ("cards", None)
    assert isinstance(exc, km.KeyManagerError) and not isinstance(exc, km.APIError)
    text = str(exc)
    assert "awaits approval" in text and REQUEST_ID in text and "same call again" in text and "'cards'" in text
    assert len(recorder.requests) == 1  # held, not retried


@pytest.mark.parametrize(
    ("call", "operations"),
    [
        (lambda c: c.delete_principal("bob"), ("principal.remove",)),
        (lambda c: c.create_principal("eve", "admin"), ("principal.admin",)),
        (lambda c: c.disable_key("cards"), ("key.disable",)),
        (lambda c: c.update_key("cards", policy={"decrypt": ["x"]}), ("key.grant",)),
        (lambda c: c.get_key("cards"), ("key.export",)),  # any call, even a retryable read
        (lambda c: c.set_approval_rules({"key.delete": km.ApprovalRule(3)}), ("approval.rules",)),
    ],
)
def test_any_call_answered_pending_raises_it(call: Any, operations: tuple[str, ...]) -> None:
    recorder = Recorder(pending(operations))
    with client(recorder) as c, pytest.raises(km.ApprovalPending) as held:
        call(c)
    assert held.value.operations == operations and len(recorder.requests) == 1


def test_the_principal_a_held_call_names_is_carried() -> None:
    with client(Recorder(pending(("principal.remove",)))) as c, pytest.raises(km.ApprovalPending) as held:
        c.delete_principal("bob")
    assert held.value.principal == "bob" and "[principal 'bob']" in str(held.value)


def test_async_client_raises_approval_pending() -> None:
    recorder = Recorder(pending())

    async def main() -> km.ApprovalPending:
        async with km.AsyncKeyManager("https://km.test", transport=httpx.MockTransport(recorder)) as c:
            with pytest.raises(km.ApprovalPending) as held:
                await c.schedule_key_deletion("cards")
            return held.value

    exc = asyncio.run(main())
    assert (exc.request_id, exc.operations, exc.approvals_required) == (REQUEST_ID, ("key.delete",), 2)
    assert exc.key == "cards"


def test_an_onboard_stream_answered_pending_raises_it() -> None:
    with client(Recorder(pending(("key.export",)))) as c, pytest.raises(km.ApprovalPending):
        c.encrypt_stream_onboard("cards", io.BytesIO(b"data"), io.BytesIO())


def test_a_202_that_is_not_pending_approval_is_an_api_error() -> None:
    with client(Recorder(httpx.Response(202, json={"status": "accepted"}))) as c, pytest.raises(km.APIError) as raised:
        c.delete_principal("bob")
    assert not isinstance(raised.value, km.ApprovalPending) and raised.value.status == 202


def test_a_pending_answer_without_its_fields_is_an_invalid_response() -> None:
    answer = httpx.Response(202, json={"status": "pending_approval", "request_id": REQUEST_ID})
    with client(Recorder(answer)) as c, pytest.raises(km.APIError) as raised:
        c.delete_principal("bob")
    assert (raised.value.status, raised.value.code) == (202, "invalid_response")


def test_once_approved_the_same_call_runs() -> None:
    recorder = Recorder(pending(), httpx.Response(200, json={**KEY_JSON, "state": "pending_deletion"}))
    with client(recorder) as c:
        with pytest.raises(km.ApprovalPending):
            c.schedule_key_deletion("cards", 7)
        assert c.schedule_key_deletion("cards", 7).state == "pending_deletion"
    assert sent(recorder, 0) == sent(recorder, 1) == ("DELETE", "/v1/keys/cards?pending_days=7", None)


# --- approval requests -------------------------------------------------------------------------


def test_list_approvals_with_and_without_a_state() -> None:
    recorder = Recorder(httpx.Response(200, json=[APPROVAL_JSON]))
    with client(recorder) as c:
        [listed] = c.list_approvals()
        assert c.list_approvals("pending") == [listed]
    assert sent(recorder, 0) == ("GET", "/v1/approvals", None)
    assert sent(recorder, 1) == ("GET", "/v1/approvals?state=pending", None)
    assert isinstance(listed, km.Approval) and listed.id == REQUEST_ID


def test_get_approval_reads_every_field() -> None:
    recorder = Recorder(approval())
    with client(recorder) as c:
        got = c.get_approval(REQUEST_ID)
    assert sent(recorder) == ("GET", f"/v1/approvals/{REQUEST_ID}", None)
    assert (got.operations, got.target, got.arguments) == (("key.delete",), "k1", {"pending_days": 7})
    assert (got.digest, got.requester, got.state, got.approvals_required) == (DIGEST, "alice", "pending", 2)
    assert got.denial is None and got.executed_at is None
    assert got.approvals == (km.ApprovalVote("bob", datetime(2030, 1, 1, 10, tzinfo=UTC)),)
    assert (got.created_at, got.expires_at) == (datetime(2030, 1, 1, 9, tzinfo=UTC), datetime.fromisoformat(EXPIRES))


def test_a_denied_or_executed_request() -> None:
    denial = {"principal": "carol", "at": "2030-01-01T11:00:00+00:00", "reason": "not today"}
    recorder = Recorder(approval(state="denied", denial=denial), approval(state="executed", executed_at=EXPIRES))
    with client(recorder) as c:
        denied, executed = c.get_approval(REQUEST_ID), c.get_approval(REQUEST_ID)
    assert denied.denial == km.ApprovalDenial("carol", datetime(2030, 1, 1, 11, tzinfo=UTC), "not today")
    assert executed.executed_at == datetime.fromisoformat(EXPIRES)


def test_approve_sends_the_digest() -> None:
    recorder = Recorder(approval(state="approved"))
    with client(recorder) as c:
        assert c.approve(REQUEST_ID, DIGEST).state == "approved"
    assert sent(recorder) == ("POST", f"/v1/approvals/{REQUEST_ID}/approve", {"digest": DIGEST})


@pytest.mark.parametrize(("status", "code", "cls"), [(403, "forbidden", km.Forbidden), (409, "conflict", km.Conflict)])
def test_approve_refusals_are_api_errors(status: int, code: str, cls: type[km.APIError]) -> None:
    recorder = Recorder(error(status, code, "self-approval"))
    with client(recorder) as c, pytest.raises(cls):
        c.approve(REQUEST_ID, DIGEST)
    assert len(recorder.requests) == 1  # never retried


def test_deny_sends_the_reason_or_null() -> None:
    recorder = Recorder(approval(state="denied"))
    with client(recorder) as c:
        assert c.deny(REQUEST_ID, "not today").state == "denied"
        c.deny(REQUEST_ID)
    assert sent(recorder, 0) == ("POST", f"/v1/approvals/{REQUEST_ID}/deny", {"reason": "not today"})
    assert sent(recorder, 1)[2] == {"reason": None}


def test_rules_of_the_service_and_of_a_key() -> None:
    recorder = Recorder(httpx.Response(200, json=RULES_JSON))
    with client(recorder) as c:
        rules = c.get_approval_rules()
        assert c.get_approval_rules(key="my key") == rules
    assert sent(recorder, 0) == ("GET", "/v1/approvals/rules", None)
    assert sent(recorder, 1) == ("GET", "/v1/keys/my%20key/approval-rules", None)
    assert rules == {
        "key.delete": km.ApprovalRule(2, None, 24),
        "principal.admin": km.ApprovalRule(1, ("bob", "carol"), 48),
    }


def test_set_rules_takes_rules_or_mappings() -> None:
    recorder = Recorder(httpx.Response(200, json=RULES_JSON))
    with client(recorder) as c:
        admins: dict[str, Any] = {"approvals": 1, "approvers": ["bob", "carol"]}
        rules: dict[str, Any] = {"key.delete": km.ApprovalRule(2), "principal.admin": admins}
        assert c.set_approval_rules(rules)["principal.admin"].approvers == ("bob", "carol")
        c.set_approval_rules({"key.export": km.ApprovalRule(1, ("bob",), 2)}, key="cards")
    assert sent(recorder, 0) == (
        "PUT",
        "/v1/approvals/rules",
        {
            "rules": {
                "key.delete": {"approvals": 2, "approvers": None, "ttl_hours": 24},
                "principal.admin": {"approvals": 1, "approvers": ["bob", "carol"]},
            }
        },
    )
    assert sent(recorder, 1) == (
        "PUT",
        "/v1/keys/cards/approval-rules",
        {"rules": {"key.export": {"approvals": 1, "approvers": ["bob"], "ttl_hours": 2}}},
    )


def test_a_rule_without_ttl_or_approvers_takes_the_defaults() -> None:
    assert km.ApprovalRule.from_json({"approvals": 1}) == km.ApprovalRule(1, None, 24)


def test_async_methods_send_what_the_sync_ones_do() -> None:
    def answers() -> list[httpx.Response]:
        return [approval(), approval(), approval(), httpx.Response(200, json=RULES_JSON)]

    def calls(c: Any) -> list[Any]:
        return [
            c.get_approval(REQUEST_ID),
            c.approve(REQUEST_ID, DIGEST),
            c.deny(REQUEST_ID, "no"),
            c.set_approval_rules({"key.delete": km.ApprovalRule(2)}, key="cards"),
        ]

    sync = Recorder(*answers())
    with client(sync) as c:
        expected = calls(c)
    asynchronous = Recorder(*answers())

    async def main() -> list[Any]:
        async with km.AsyncKeyManager("https://km.test", transport=httpx.MockTransport(asynchronous)) as c:
            return [await call for call in calls(c)]

    assert asyncio.run(main()) == expected
    assert [sent(asynchronous, i) for i in range(4)] == [sent(sync, i) for i in range(4)]

    listing = Recorder(httpx.Response(200, json=[APPROVAL_JSON]), httpx.Response(200, json=RULES_JSON))

    async def reads() -> tuple[list[km.Approval], dict[str, km.ApprovalRule]]:
        async with km.AsyncKeyManager("https://km.test", transport=httpx.MockTransport(listing)) as c:
            return await c.list_approvals("approved"), await c.get_approval_rules()

    listed, rules = asyncio.run(reads())
    assert [a.id for a in listed] == [REQUEST_ID] and rules["key.delete"].approvals == 2
    assert [sent(listing, i)[1] for i in range(2)] == ["/v1/approvals?state=approved", "/v1/approvals/rules"]


# --- kmctl -------------------------------------------------------------------------------------


def test_kmctl_exits_4_when_a_command_awaits_approval() -> None:
    done = run(Recorder(pending()), "keys", "delete", "cards")
    assert done.returncode == 4 and done.stdout == b""
    assert b"awaiting approval" in done.stderr and REQUEST_ID.encode() in done.stderr
    assert b"run the same command again" in done.stderr


def test_kmctl_prints_a_pending_call_as_json_when_asked() -> None:
    done = run(Recorder(pending(("principal.remove",))), "principals", "delete", "bob", "--json")
    assert done.returncode == 4
    assert json.loads(done.stderr) == {
        "status": "pending_approval",
        "request_id": REQUEST_ID,
        "operations": ["principal.remove"],
        "approvals_required": 2,
        "expires_at": EXPIRES,
        "exit_code": 4,
    }


def test_kmctl_approve_shows_the_request_and_approves_the_digest_it_read() -> None:
    recorder = Recorder(approval(), approval(state="approved"))
    done = run(recorder, "approvals", "approve", REQUEST_ID, "-o", "json")
    assert done.returncode == 0, done.stderr
    assert [sent(recorder, i) for i in range(2)] == [
        ("GET", f"/v1/approvals/{REQUEST_ID}", None),
        ("POST", f"/v1/approvals/{REQUEST_ID}/approve", {"digest": DIGEST}),
    ]
    assert json.loads(done.stdout)["state"] == "approved"
    shown = done.stderr.decode()
    assert DIGEST in shown and "key.delete on k1" in shown and '"pending_days": 7' in shown and "alice" in shown


def test_kmctl_approve_with_the_digest_seen_elsewhere() -> None:
    recorder = Recorder(approval(), approval(state="approved"))
    done = run(recorder, "approvals", "approve", REQUEST_ID, "--digest", DIGEST.upper())
    assert done.returncode == 0, done.stderr
    assert sent(recorder, 1)[2] == {"digest": DIGEST}


def test_kmctl_approve_refuses_a_digest_that_differs_and_approves_nothing() -> None:
    recorder = Recorder(approval())
    done = run(recorder, "approvals", "approve", REQUEST_ID, "--digest", "cd" * 32)
    assert done.returncode == 1
    assert [r.method for r in recorder.requests] == ["GET"]
    assert b"nothing was approved" in done.stderr and ("cd" * 32).encode() in done.stderr


def test_kmctl_approve_refuses_a_digest_that_is_not_one_before_anything_is_sent() -> None:
    recorder = Recorder(approval())
    done = run(recorder, "approvals", "approve", REQUEST_ID, "--digest", "abc")
    assert done.returncode == 2 and recorder.requests == []


def test_kmctl_list_show_and_deny() -> None:
    recorder = Recorder(httpx.Response(200, json=[APPROVAL_JSON]), approval(), approval(state="denied"))
    listed = run(recorder, "approvals", "list", "--state", "pending", "-o", "text")
    assert listed.returncode == 0 and listed.stdout.decode().startswith(f"{REQUEST_ID}\tpending\t")
    shown = run(recorder, "approvals", "show", REQUEST_ID, "-o", "json")
    assert json.loads(shown.stdout)["approvals"] == [{"principal": "bob", "at": "2030-01-01T10:00:00+00:00"}]
    denied = run(recorder, "approvals", "deny", REQUEST_ID, "--reason", "not today")
    assert denied.returncode == 0
    assert [sent(recorder, i)[:2] for i in range(2)] == [
        ("GET", "/v1/approvals?state=pending"),
        ("GET", f"/v1/approvals/{REQUEST_ID}"),
    ]
    assert sent(recorder, 2) == ("POST", f"/v1/approvals/{REQUEST_ID}/deny", {"reason": "not today"})
    too_long = run(recorder, "approvals", "deny", REQUEST_ID, "--reason", "x" * 201)
    assert too_long.returncode == 2 and len(recorder.requests) == 3


def test_kmctl_rules_show_and_set(tmp_path: Path) -> None:
    recorder = Recorder(httpx.Response(200, json=RULES_JSON))
    shown = run(recorder, "approvals", "rules", "--key", "cards", "-o", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout) == RULES_JSON["rules"]
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps(RULES_JSON))  # the API's wrapped shape is taken too
    set_file = run(recorder, "approvals", "rules", "set", f"@{rules_file}")
    set_inline = run(recorder, "approvals", "rules", "--key", "cards", "set", '{"key.delete": {"approvals": 3}}')
    assert (set_file.returncode, set_inline.returncode) == (0, 0), set_inline.stderr
    assert sent(recorder, 0)[:2] == ("GET", "/v1/keys/cards/approval-rules")
    assert sent(recorder, 1) == ("PUT", "/v1/approvals/rules", RULES_JSON)
    assert sent(recorder, 2) == ("PUT", "/v1/keys/cards/approval-rules", {"rules": {"key.delete": {"approvals": 3}}})
    bad = run(recorder, "approvals", "rules", "set", '{"key.delete": 2}')
    assert bad.returncode == 2 and len(recorder.requests) == 3


def test_kmctl_rules_set_held_for_approval_exits_4() -> None:
    done = run(Recorder(pending(("approval.rules",))), "approvals", "rules", "set", '{"key.delete": {"approvals": 1}}')
    assert done.returncode == 4 and REQUEST_ID.encode() in done.stderr
