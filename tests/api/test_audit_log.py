"""Audit through the API: one record per request touching a key or principal, refusals, fail closed."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.api.audit_trail import AuditContext, audited
from keymanager.config import Settings
from keymanager.db import make_engine
from keymanager.domain.audit import AuditQuery, chain
from keymanager.errors import DatabaseUnavailable
from keymanager.services.container import Services
from tests.conftest import auth
from tests.db.test_audit import entry
from tests.db.test_audit_forgeries import insert

CARD = "4111111111111111"


def setup_billing(client: TestClient, admin: str) -> str:
    token = client.post("/v1/principals", json={"name": "billing", "role": "app"}, headers=auth(admin)).json()["token"]
    policy = {"encrypt": ["billing"], "decrypt": ["billing"]}
    assert client.post("/v1/keys", json={"name": "cards", "policy": policy}, headers=auth(admin)).status_code == 201
    return str(token)


def records(services: Services) -> list[dict[str, Any]]:
    return [r.fields() for r in services.audit_records.query(AuditQuery(limit=1000))]


def encrypt(client: TestClient, token: str) -> Any:
    body = {"plaintext": base64.b64encode(CARD.encode()).decode()}
    return client.post("/v1/keys/cards/encrypt", json=body, headers=auth(token))


def test_every_request_touching_a_key_or_principal_is_recorded(
    client: TestClient, services: Services, admin_token: str
) -> None:
    billing = setup_billing(client, admin_token)
    encrypted = encrypt(client, billing)
    ciphertext = encrypted.json()["ciphertext"]
    assert client.post("/v1/decrypt", json={"ciphertext": ciphertext}, headers=auth(billing)).status_code == 200
    assert client.post("/v1/decrypt", json={"ciphertext": ciphertext[:-4]}, headers=auth(billing)).status_code == 400
    assert encrypt(client, "kmt_not-a-token").status_code == 401
    assert client.get("/v1/keys/cards", headers=auth(admin_token)).status_code == 200
    assert client.get("/v1/health").status_code == 200  # not about a key: not recorded

    found = [(r["action"], r["principal"], r["outcome"], r["status"]) for r in records(services)]
    assert found == [
        ("principal.create", "admin", "ok", 201),
        ("key.create", "admin", "ok", 201),
        ("key.encrypt", "billing", "ok", 200),
        ("key.decrypt", "billing", "ok", 200),
        ("key.decrypt", "billing", "error", 400),
        ("auth.failed", None, "denied", 401),  # a summary: one per client address and interval
        ("key.read", "admin", "ok", 200),
    ]
    by_action = records(services)
    key_id = by_action[1]["key_id"]
    assert by_action[2]["key_id"] == key_id and by_action[2]["key_version"] == 1
    assert by_action[2]["request_id"] == encrypted.headers["x-request-id"]
    assert services.audit_records.verify().ok


def test_records_never_hold_plaintext_ciphertext_or_tokens(
    client: TestClient, services: Services, admin_token: str
) -> None:
    billing = setup_billing(client, admin_token)
    ciphertext = encrypt(client, billing).json()["ciphertext"]
    client.post("/v1/decrypt", json={"ciphertext": ciphertext}, headers=auth(billing))
    text = repr(records(services))
    for secret in (CARD, base64.b64encode(CARD.encode()).decode(), ciphertext, billing, admin_token):
        assert secret not in text


def test_a_forbidden_request_is_recorded_as_denied(client: TestClient, services: Services, admin_token: str) -> None:
    setup_billing(client, admin_token)
    other = client.post("/v1/principals", json={"name": "support", "role": "app"}, headers=auth(admin_token))
    assert encrypt(client, other.json()["token"]).status_code == 403
    last = records(services)[-1]
    assert (last["action"], last["principal"], last["outcome"], last["status"]) == (
        "key.encrypt",
        "support",
        "denied",
        403,
    )
    assert last["details"] == {"key": "cards"}


def test_a_failed_change_leaves_one_error_record(client: TestClient, services: Services, admin_token: str) -> None:
    setup_billing(client, admin_token)
    again = client.post("/v1/keys", json={"name": "cards"}, headers=auth(admin_token))
    assert again.status_code == 409
    last = records(services)[-1]
    assert (last["action"], last["outcome"], last["status"]) == ("key.create", "error", 409)
    assert [r["action"] for r in records(services)].count("key.create") == 2


def test_a_change_is_recorded_once_in_its_transaction_with_its_declared_status(
    client: TestClient, services: Services, admin_token: str
) -> None:
    made = client.post("/v1/principals", json={"name": "ops", "role": "app"}, headers=auth(admin_token))
    assert made.status_code == 201
    assert client.post("/v1/principals/ops/access-keys", headers=auth(admin_token)).status_code == 201
    assert client.delete("/v1/principals/ops", headers=auth(admin_token)).status_code == 204
    assert client.delete("/v1/principals/ops", headers=auth(admin_token)).status_code == 404
    found = [(r["action"], r["status"], r["details"]) for r in records(services)]
    assert found == [
        ("principal.create", 201, {"name": "ops", "role": "app"}),
        ("access_key.create", 201, {"name": "ops"}),
        ("principal.delete", 204, {"name": "ops"}),
        ("principal.delete", 404, {"name": "ops"}),
    ]


def test_a_refusal_by_a_role_guard_is_recorded_as_denied(
    client: TestClient, services: Services, admin_token: str
) -> None:
    billing = setup_billing(client, admin_token)
    assert client.post("/v1/keys/cards/rotate", headers=auth(billing)).status_code == 403
    last = records(services)[-1]
    assert (last["action"], last["principal"], last["outcome"], last["status"]) == (
        "key.rotate",
        "billing",
        "denied",
        403,
    )
    assert last["key_id"] == records(services)[1]["key_id"] and last["details"] == {"key": "cards"}


def test_a_request_whose_record_cannot_be_written_fails_closed(
    client: TestClient, services: Services, admin_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    billing = setup_billing(client, admin_token)

    def refuse(entries: object) -> None:
        raise DatabaseUnavailable()

    monkeypatch.setattr(services.audit_records, "append_current", refuse)
    refused = encrypt(client, billing)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "database_unavailable"
    assert "ciphertext" not in refused.text


def test_audit_listing_and_verify_need_auditor_or_admin(
    client: TestClient, services: Services, admin_token: str
) -> None:
    billing = setup_billing(client, admin_token)
    encrypt(client, billing)
    auditor = client.post("/v1/principals", json={"name": "auditor", "role": "auditor"}, headers=auth(admin_token))
    auditor_token = auditor.json()["token"]
    assert client.get("/v1/audit", headers=auth(billing)).status_code == 403
    page = client.get("/v1/audit", params={"key": "cards", "limit": 1}, headers=auth(auditor_token)).json()
    assert [r["action"] for r in page["records"]] == ["key.create"]
    assert page["next"] is not None
    following = client.get(
        "/v1/audit", params={"key": "cards", "after": page["next"]}, headers=auth(auditor_token)
    ).json()
    assert [r["action"] for r in following["records"]] == ["key.encrypt"]
    assert following["next"] is None
    by_principal = client.get("/v1/audit", params={"principal": "billing"}, headers=auth(admin_token)).json()
    assert {r["principal"] for r in by_principal["records"]} == {"billing"}
    verified = client.get("/v1/audit/verify", headers=auth(auditor_token)).json()
    assert verified["ok"] is True and verified["first_broken_seq"] is None


def test_rows_forged_past_a_head_are_a_break_and_never_listed(
    client: TestClient, services: Services, settings: Settings, admin_token: str
) -> None:
    """``GET /v1/audit/verify`` walks every row, and ``GET /v1/audit`` lists only verified ranges."""
    setup_billing(client, admin_token)
    head = max(services.audit_records.head().heads.values(), key=lambda h: h.seq)
    fake = replace(entry(1, principal="mallory"), request_id="forged")
    engine = make_engine(settings.resolved_database_url())
    try:
        insert(engine, chain([fake], head.seq, head.hash, head.chain))
    finally:
        engine.dispose()
    verified = client.get("/v1/audit/verify", headers=auth(admin_token)).json()
    assert (verified["ok"], verified["first_broken_chain"], verified["first_broken_seq"]) == (
        False,
        head.chain,
        head.seq + 1,
    )
    assert "past the chain's head" in verified["reason"]
    listed = client.get("/v1/audit", params={"limit": 1000}, headers=auth(admin_token)).json()["records"]
    assert listed and "forged" not in {r["request_id"] for r in listed}
    assert client.get("/v1/audit", params={"principal": "mallory"}, headers=auth(admin_token)).json()["records"] == []


def test_the_trail_owes_a_record_unless_the_route_took_its_success_record() -> None:
    @audited("key.rotate")
    def endpoint() -> None: ...

    class Route:
        status_code = 201

    trail = AuditContext("req", "127.0.0.1", {"endpoint": endpoint, "route": Route(), "path_params": {"key": "k"}})
    assert trail.owes_record(201) and trail.owes_record(409)
    taken = trail.success(failed=0)
    assert (taken.action, taken.status, dict(taken.details)) == ("key.rotate", 201, {"key": "k", "failed": 0})
    assert not trail.owes_record(201)
    assert trail.owes_record(409) and trail.owes_record(499)  # a change that failed after taking its record
    assert not AuditContext("req", None, {"endpoint": print}).owes_record(500)  # not an audited route
    with pytest.raises(AttributeError):
        trail.recorded = True  # type: ignore[attr-defined]  # the retired hand-set flag
