"""``/v1/inventory``: the console's reads (every key with its aliases, tags and last use; the
service's facts), on SQLite and PostgreSQL, for the roles that read the log only; and the audit
listing's ``outcome`` filter the console's audit page uses."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.config import Settings
from keymanager.db import make_engine
from keymanager.db.kms import KmsStore
from keymanager.services import overview
from keymanager.services.authorization import RIGHTS
from keymanager.services.container import Services
from tests.conftest import auth, make_settings
from tests.support.postgres import create_database, drop_database

PLAINTEXT = base64.b64encode(b"4111 1111 1111 1111").decode()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """The test's settings, on SQLite and on a throwaway PostgreSQL database."""
    if request.param == "sqlite":
        yield make_settings(tmp_path / "var", kmip_port=0)
        return
    url = create_database()
    try:
        yield make_settings(tmp_path / "var", database_url=url, kmip_port=0)
    finally:
        drop_database(url)


@pytest.fixture
def roles(new_principal: Callable[..., str], admin: dict[str, str]) -> dict[str, dict[str, str]]:
    return {
        "app": auth(new_principal("billing")),
        "auditor": auth(new_principal("inspector", "auditor")),
        "admin": admin,
    }


def _items(client: TestClient, headers: dict[str, str], **query: str) -> list[dict[str, Any]]:
    answer = client.get("/v1/inventory/keys", params=query, headers=headers)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()
    return items


def test_every_key_with_its_aliases_tags_and_last_use(
    client: TestClient,
    services: Services,
    roles: dict[str, dict[str, str]],
    new_key: Callable[..., dict[str, Any]],
) -> None:
    cards = new_key("cards", {"encrypt": ["billing"], "decrypt": ["billing"]})
    new_key("unused", {})
    services.store.change_aliases(added=[("cards-too", cards["id"])], record=None)
    tags = KmsStore(make_engine(services.settings.resolved_database_url()))  # the KMS door's TagResource store
    tags.tag_key(cards["id"], {"team": "payments", "<b>": "<i>"}, limit=50, record=None)
    assert client.get("/v1/keys/cards", headers=roles["admin"]).status_code == 200  # a read is no use
    assert _items(client, roles["auditor"], key="cards")[0]["last_used"] is None
    encrypted = client.post("/v1/keys/cards/encrypt", json={"plaintext": PLAINTEXT}, headers=roles["app"])
    assert encrypted.status_code == 200

    for role in ("auditor", "admin"):
        items = {item["name"]: item for item in _items(client, roles[role])}
        assert set(items) == {"cards", "unused"}  # an auditor sees keys no policy may name it in
        assert items["cards"]["aliases"] == ["cards-too"]
        assert items["cards"]["tags"] == {"<b>": "<i>", "team": "payments"}
        assert items["cards"]["last_used"] is not None
        assert items["cards"]["policy"]["encrypt"] == ["billing"]
        assert (
            items["unused"]["aliases"] == [] and items["unused"]["tags"] == {} and items["unused"]["last_used"] is None
        )
        assert {"algorithm", "state", "primary_version", "versions", "usage", "rotation_period_days"} <= set(
            items["cards"]
        )
    refused = client.get("/v1/inventory/keys", headers=roles["app"])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"


def test_one_key_by_name_or_id_is_audited_as_a_key_inventory(
    client: TestClient, roles: dict[str, dict[str, str]], new_key: Callable[..., dict[str, Any]]
) -> None:
    key = new_key("single", {})
    assert [i["id"] for i in _items(client, roles["auditor"], key="single")] == [key["id"]]
    assert [i["name"] for i in _items(client, roles["auditor"], key=key["id"])] == ["single"]
    missing = client.get("/v1/inventory/keys", params={"key": "nothing-here"}, headers=roles["auditor"])
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "key_not_found"
    malformed = client.get("/v1/inventory/keys", params={"key": "<img>"}, headers=roles["auditor"])
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "invalid_request"
    records = client.get(
        "/v1/audit", params={"action": "key.inventory", "order": "desc"}, headers=roles["admin"]
    ).json()
    assert [r["status"] for r in records["records"]] == [400, 404, 200, 200]
    assert records["records"][-1]["key_id"] == key["id"] and records["records"][-1]["principal"] == "inspector"


def test_the_last_use_is_looked_for_among_the_newest_records_only(
    client: TestClient,
    roles: dict[str, dict[str, str]],
    new_key: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    new_key("early", {"encrypt": ["billing"]})
    assert client.post("/v1/keys/early/encrypt", json={"plaintext": PLAINTEXT}, headers=roles["app"]).status_code == 200
    monkeypatch.setattr(overview, "LAST_USE_WINDOW", 3)
    assert _items(client, roles["admin"], key="early")[0]["last_used"] is not None
    for _ in range(3):
        assert client.get("/v1/keys/early", headers=roles["admin"]).status_code == 200
    assert _items(client, roles["admin"], key="early")[0]["last_used"] is None


def test_uses_are_the_rights_tables_key_actions_less_reads() -> None:
    assert set(RIGHTS) >= overview.USES
    assert {"key.encrypt", "key.decrypt", "key.sign", "kms.Encrypt", "kmip.Encrypt", "xks.Decrypt"} <= overview.USES
    assert not {"key.read", "key.list", "kms.DescribeKey", "key.create", "audit.read"} & overview.USES


def test_the_service_facts(client: TestClient, services: Services, roles: dict[str, dict[str, str]]) -> None:
    answer = client.get("/v1/inventory/service", headers=roles["auditor"])
    assert answer.status_code == 200, answer.text
    facts = answer.json()
    assert facts["token"]["label"] == services.settings.pkcs11_token_label
    assert facts["token"]["manufacturer"] and "serial" in facts["token"]
    mechanisms = {m["name"]: m for m in facts["mechanisms"]}
    assert "CKM_AES_KEY_GEN" in mechanisms and mechanisms["CKM_AES_KEY_GEN"]["max_key_size"] >= 32
    specs = {(s["algorithm"], s["usage"]): s for s in facts["specs"]}
    assert specs[("AES_256_CBC_HMAC_SHA256", "ENCRYPT_DECRYPT")]["supported"] is True
    assert ("RSA_2048", "SIGN_VERIFY") in specs and ("RSA_2048", "ENCRYPT_DECRYPT") in specs
    assert "AES_256_CBC_HMAC_SHA256" in facts["features"]["supported"]
    assert facts["readiness"] == {"hsm": "ok", "database": "ok"}
    assert facts["database"]["dialect"] == ("postgresql" if services.settings.database_url else "sqlite")
    if facts["database"]["dialect"] == "postgresql":
        assert facts["database"]["standby"] is False and isinstance(facts["database"]["replicas"], list)
    doors = {d["name"]: d for d in facts["doors"]}
    assert doors["REST API"]["port"] == services.settings.port and doors["KMIP"]["on"] is False
    assert doors["web console"]["on"] is True and doors["web console"]["path"] == "/ui/"
    assert doors["Vault Transit"]["path"] == "/v1/transit/"
    assert facts["checkpoint"] is None
    services.audit_chain.emit_checkpoint(always=True)
    checkpoint = client.get("/v1/inventory/service", headers=roles["admin"]).json()["checkpoint"]
    assert checkpoint["chains"] >= 1 and checkpoint["line"].startswith("audit checkpoint chains=")
    refused = client.get("/v1/inventory/service", headers=roles["app"])
    assert refused.status_code == 403
    listed = client.get("/v1/audit", params={"action": "service.read"}, headers=roles["admin"]).json()["records"]
    assert listed == []  # not audited, as /metrics


def test_the_audit_listing_filters_by_outcome(client: TestClient, roles: dict[str, dict[str, str]]) -> None:
    assert client.get("/v1/principals", headers=roles["app"]).status_code == 403
    assert client.get("/v1/principals", headers=roles["admin"]).status_code == 200
    for outcome in ("ok", "denied"):
        listed = client.get("/v1/audit", params={"outcome": outcome}, headers=roles["auditor"]).json()["records"]
        assert listed and {r["outcome"] for r in listed} == {outcome}
    assert any(r["action"] == "principal.list" and r["principal"] == "billing" for r in listed)
    wrong = client.get("/v1/audit", params={"outcome": "maybe"}, headers=roles["auditor"])
    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid_request"


def test_what_the_token_says_of_a_versions_objects(
    client: TestClient, roles: dict[str, dict[str, str]], new_key: Callable[..., dict[str, Any]]
) -> None:
    key = new_key("attested", {})
    assert client.post("/v1/keys/attested/rotate", headers=roles["admin"]).status_code == 200
    answer = client.get("/v1/inventory/keys/attested/hsm-objects", headers=roles["auditor"])
    assert answer.status_code == 200, answer.text
    read = answer.json()
    assert read["key_id"] == key["id"] and read["version"] == 2
    roles_read = {o["role"]: o for o in read["objects"]}
    assert set(roles_read) == {"encryption key", "MAC key"}  # AES_256_CBC_HMAC_SHA256: two secret keys
    for found in roles_read.values():
        attributes = found["attributes"]
        assert found["missing"] is False and found["class"] == "CKO_SECRET_KEY"
        assert attributes["CKA_TOKEN"] is True and attributes["CKA_SENSITIVE"] is True
        assert attributes["CKA_EXTRACTABLE"] is False and attributes["CKA_NEVER_EXTRACTABLE"] is True
        assert "CKA_VALUE" not in attributes
    assert roles_read["encryption key"]["key_type"] == "CKK_AES" and roles_read["encryption key"]["value_len"] == 32
    first = client.get("/v1/inventory/keys/attested/hsm-objects", params={"version": "1"}, headers=roles["admin"])
    assert first.status_code == 200 and first.json()["version"] == 1
    missing = client.get("/v1/inventory/keys/attested/hsm-objects", params={"version": "9"}, headers=roles["admin"])
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert client.get("/v1/inventory/keys/nothing/hsm-objects", headers=roles["admin"]).status_code == 404
    assert client.get("/v1/inventory/keys/%3Cb%3E/hsm-objects", headers=roles["admin"]).status_code == 400
    assert client.get("/v1/inventory/keys/attested/hsm-objects", headers=roles["app"]).status_code == 403
    records = client.get("/v1/audit", params={"action": "key.hsm_objects"}, headers=roles["admin"]).json()["records"]
    assert [(r["key_version"], r["status"]) for r in records][:2] == [(2, 200), (1, 200)]


def test_a_version_in_use_is_read_from_its_token_object(
    client: TestClient, roles: dict[str, dict[str, str]], new_key: Callable[..., dict[str, Any]]
) -> None:
    """A key used since the session opened has a session copy under the same label: the token object is read."""
    new_key("busy", {"encrypt": ["billing"]})
    assert client.post("/v1/keys/busy/encrypt", json={"plaintext": PLAINTEXT}, headers=roles["app"]).status_code == 200
    read = client.get("/v1/inventory/keys/busy/hsm-objects", headers=roles["auditor"])
    assert read.status_code == 200, read.text
    assert {o["attributes"]["CKA_TOKEN"] for o in read.json()["objects"]} == {True}
