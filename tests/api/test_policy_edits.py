"""Safe policy edits: an ETag on every answer about one key, If-Match on PATCH, known principals only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from tests.api.support import assert_error


def test_key_answers_carry_the_metadata_version_as_etag(
    client: TestClient, admin: dict[str, str], new_key: Callable[..., dict[str, Any]]
) -> None:
    created = client.post("/v1/keys", json={"name": "tagged", "policy": {}}, headers=admin)
    read = client.get("/v1/keys/tagged", headers=admin)
    assert created.headers["etag"] == read.headers["etag"]
    assert read.headers["etag"].startswith('"') and read.headers["etag"].endswith('"')

    patched = client.patch("/v1/keys/tagged", json={"description": "x"}, headers=admin)
    rotated = client.post("/v1/keys/tagged/rotate", headers=admin)
    tags = [read.headers["etag"], patched.headers["etag"], rotated.headers["etag"]]
    assert len(set(tags)) == 3, tags
    assert client.get("/v1/keys/tagged", headers=admin).headers["etag"] == rotated.headers["etag"]


def test_patch_with_the_current_etag_applies(client: TestClient, admin: dict[str, str]) -> None:
    client.post("/v1/keys", json={"name": "cas", "policy": {}}, headers=admin)
    etag = client.get("/v1/keys/cas", headers=admin).headers["etag"]

    answer = client.patch("/v1/keys/cas", json={"description": "mine"}, headers={**admin, "If-Match": etag})

    assert answer.status_code == 200, answer.text
    assert answer.json()["description"] == "mine"
    assert answer.headers["etag"] != etag


def test_patch_with_a_stale_etag_is_412_and_changes_nothing(client: TestClient, admin: dict[str, str]) -> None:
    client.post("/v1/keys", json={"name": "stale", "policy": {}}, headers=admin)
    seen = client.get("/v1/keys/stale", headers=admin).headers["etag"]
    client.patch("/v1/keys/stale", json={"description": "theirs"}, headers=admin)

    answer = client.patch("/v1/keys/stale", json={"description": "mine"}, headers={**admin, "If-Match": seen})

    assert_error(answer, 412, "precondition_failed")
    assert client.get("/v1/keys/stale", headers=admin).json()["description"] == "theirs"


def test_if_match_takes_a_list_or_a_star_and_never_a_weak_tag(client: TestClient, admin: dict[str, str]) -> None:
    client.post("/v1/keys", json={"name": "lists", "policy": {}}, headers=admin)
    etag = client.get("/v1/keys/lists", headers=admin).headers["etag"]

    weak = client.patch("/v1/keys/lists", json={"description": "a"}, headers={**admin, "If-Match": f"W/{etag}"})
    assert_error(weak, 412, "precondition_failed")
    listed = client.patch("/v1/keys/lists", json={"description": "b"}, headers={**admin, "If-Match": f'"0", {etag}'})
    assert listed.status_code == 200, listed.text
    star = client.patch("/v1/keys/lists", json={"description": "c"}, headers={**admin, "If-Match": "*"})
    assert star.status_code == 200, star.text
    missing = client.patch("/v1/keys/nothing-here", json={"description": "c"}, headers={**admin, "If-Match": "*"})
    assert_error(missing, 404, "key_not_found")


def test_a_refused_edit_is_audited_as_an_error(client: TestClient, admin: dict[str, str]) -> None:
    client.post("/v1/keys", json={"name": "audited", "policy": {}}, headers=admin)
    answer = client.patch("/v1/keys/audited", json={"description": "x"}, headers={**admin, "If-Match": '"1"'})
    assert_error(answer, 412, "precondition_failed")

    records = client.get("/v1/audit", params={"key": "audited"}, headers=admin).json()
    records = records["records"] if isinstance(records, dict) else records
    assert [(r["action"], r["status"]) for r in records if r["request_id"] == answer.headers["x-request-id"]] == [
        ("key.update", 412)
    ]


def test_a_policy_naming_an_unknown_principal_is_refused_naming_it(
    client: TestClient, admin: dict[str, str], new_principal: Callable[..., str]
) -> None:
    new_principal("billing")

    created = client.post(
        "/v1/keys", json={"name": "ghosts", "policy": {"encrypt": ["billing", "ghost"]}}, headers=admin
    )
    body = assert_error(created, 400, "invalid_request")
    assert "ghost" in body["error"]["message"] and "billing" not in body["error"]["message"]
    assert client.get("/v1/keys/ghosts", headers=admin).status_code == 404

    client.post("/v1/keys", json={"name": "real", "policy": {"encrypt": ["billing"]}}, headers=admin)
    patched = client.patch("/v1/keys/real", json={"policy": {"decrypt": ["phantom"]}}, headers=admin)
    body = assert_error(patched, 400, "invalid_request")
    assert "phantom" in body["error"]["message"]
    assert client.get("/v1/keys/real", headers=admin).json()["policy"]["encrypt"] == ["billing"]
