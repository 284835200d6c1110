"""The web console in Chromium against a real server over TLS: sign-in, every page, key
management end to end (create, policy, rotate, minimum version, schedule and cancel deletion),
the audit log's filters and chain, principals and their credentials shown once.

Every action is checked where it lands: through the REST API outside the browser, and in the
audit chain under the principal that signed in. Each test fails on any console error, uncaught
exception or failed request it did not expect (``conftest.Tab``).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from playwright.sync_api import expect

from tests.e2e.conftest import Server
from tests.ui.conftest import Tab, go, make_principal, shoot, sign_in

pytestmark = pytest.mark.interop  # a browser drives the service: make test-interop


def _records(api: httpx.Client, **query: str) -> list[dict[str, object]]:
    listed = api.get("/v1/audit", params={"order": "desc", "limit": "100", **query})
    assert listed.status_code == 200, listed.text
    records: list[dict[str, object]] = listed.json()["records"]
    return records


def test_sign_in_and_every_page_renders(tab: Tab, ui_server: Server, api: httpx.Client) -> None:
    assert api.post("/v1/keys", json={"name": "tour", "policy": {}}).status_code == 201
    page = tab.page
    page.goto("/ui/")
    expect(page.get_by_role("note")).to_contain_text("Development TLS")
    shoot(tab, "sign-in")
    sign_in(tab, ui_server.admin_token)
    expect(page.get_by_role("link", name="tour")).to_be_visible()
    shoot(tab, "keys")
    page.get_by_role("link", name="tour").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("tour")
    expect(page.get_by_role("heading", name="Who can do what")).to_be_visible()
    shoot(tab, "key")
    for link, heading in (("Principals", "Principals"), ("Audit", "Audit log"), ("HSM and service", "HSM and service")):
        go(tab, link)
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        expect(page.get_by_role("link", name=link, exact=True)).to_have_attribute("aria-current", "page")
        shoot(tab, heading.lower().replace(" ", "-"))
    expect(page.get_by_role("cell", name="CKM_AES_KEY_GEN", exact=True)).to_be_visible()
    expect(page.get_by_role("cell", name="KMIP", exact=True)).to_be_visible()
    expect(page).to_have_title(re.compile("HSM and service"))
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Bearer token")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="You signed out.")).to_be_visible()
    assert page.evaluate("localStorage.length + sessionStorage.length") == 0
    assert page.context.cookies() == []


def test_an_admin_manages_a_key_from_creation_to_cancelled_deletion(
    tab: Tab, ui_server: Server, api: httpx.Client
) -> None:
    make_principal(api, "billing", "app")
    page = tab.page
    sign_in(tab, ui_server.admin_token)
    page.get_by_text("Create a key").click()
    create = page.get_by_role("form", name="Create a key")
    create.get_by_label("Name").fill("ledger")
    create.get_by_label("Spec").select_option(label="AES_256_GCM")
    create.get_by_label("Description").fill("the ledger's fields")
    create.get_by_role("button", name="Create key").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("ledger")
    key = api.get("/v1/keys/ledger").json()
    assert key["algorithm"] == "AES_256_GCM" and key["description"] == "the ledger's fields"

    page.get_by_label("billing may encrypt").check()
    page.get_by_label("billing may decrypt").check()
    expect(page.locator("#policy-preview")).to_contain_text("billing: encrypt, decrypt")
    page.get_by_role("button", name="Save policy").click()
    expect(page.get_by_role("status").filter(has_text="Policy saved.")).to_be_visible()
    policy = api.get("/v1/keys/ledger").json()["policy"]
    assert policy["encrypt"] == ["billing"] and policy["decrypt"] == ["billing"] and policy["generate_data_key"] == []

    page.get_by_role("button", name="Rotate now").click()
    expect(page.get_by_role("status").filter(has_text="Rotated")).to_be_visible()
    assert api.get("/v1/keys/ledger").json()["primary_version"] == 2
    page.get_by_label("Minimum decryption version").select_option("2")
    page.get_by_role("button", name="Set minimum").click()
    expect(page.get_by_role("status").filter(has_text="Minimum decryption version set to 2")).to_be_visible()
    assert api.get("/v1/keys/ledger").json()["min_decryption_version"] == 2

    schedule = page.get_by_role("button", name="Schedule deletion")
    expect(schedule).to_be_disabled()
    page.get_by_label("Waiting period (days)").fill("7")
    page.get_by_label("Type the key's name").fill("ledge")
    expect(schedule).to_be_disabled()
    page.get_by_label("Type the key's name").fill("ledger")
    expect(schedule).to_be_enabled()
    schedule.click()
    expect(page.get_by_role("status").filter(has_text="Deletion scheduled in 7 days")).to_be_visible()
    assert api.get("/v1/keys/ledger").json()["state"] == "pending_deletion"
    shoot(tab, "key-pending-deletion")
    page.get_by_role("button", name="Cancel deletion").click()
    expect(page.get_by_role("status").filter(has_text="Deletion cancelled")).to_be_visible()
    assert api.get("/v1/keys/ledger").json()["state"] == "disabled"
    page.get_by_role("button", name="Enable").click()
    expect(page.get_by_role("status").filter(has_text="Enabled.")).to_be_visible()
    assert api.get("/v1/keys/ledger").json()["state"] == "enabled"

    actions = [r["action"] for r in _records(api, key="ledger") if r["principal"] == "admin" and r["outcome"] == "ok"]
    for action in ("key.create", "key.update", "key.rotate", "key.schedule_deletion", "key.cancel_deletion"):
        assert action in actions, (action, actions)


def test_a_policy_saved_over_someone_elses_change_is_refused(tab: Tab, ui_server: Server, api: httpx.Client) -> None:
    """The editor sends the ETag of the key it showed: a change made meanwhile wins, and the page says why."""
    assert api.post("/v1/keys", json={"name": "contested", "policy": {}}).status_code == 201
    make_principal(api, "support", "app")
    page = tab.page
    sign_in(tab, ui_server.admin_token)
    page.get_by_role("link", name="contested").click()
    page.get_by_label("support may decrypt").check()
    assert api.patch("/v1/keys/contested", json={"description": "changed meanwhile"}).status_code == 200
    tab.expect_errors("412")
    page.get_by_role("button", name="Save policy").click()
    expect(page.get_by_role("alert")).to_contain_text("precondition_failed")
    assert api.get("/v1/keys/contested").json()["policy"]["decrypt"] == []


def test_the_audit_log_filters_newest_first_and_verifies_its_chain(
    tab: Tab, ui_server: Server, api: httpx.Client
) -> None:
    assert api.post("/v1/keys", json={"name": "audited", "policy": {}}).status_code == 201
    for _ in range(2):
        assert api.post("/v1/keys/audited/rotate").status_code == 200
    stranger = httpx.get(f"{ui_server.url}/v1/keys", headers={"Authorization": "Bearer nope"}, verify=str(ui_server.ca))
    assert stranger.status_code == 401
    page = tab.page
    sign_in(tab, ui_server.admin_token)
    go(tab, "Audit")
    page.get_by_label("Key", exact=True).fill("audited")
    page.get_by_label("Action").fill("key.rotate")
    page.get_by_role("button", name="Apply filters").click()
    results = page.locator("#audit-results tbody tr")
    expect(results).to_have_count(2)
    times = results.locator("td:first-child time").evaluate_all("cells => cells.map(c => c.dateTime)")
    assert times == sorted(times, reverse=True)
    expect(results.nth(0)).to_contain_text("key.rotate")
    page.get_by_label("Key", exact=True).fill("")
    page.get_by_label("Action").fill("")
    page.get_by_label("Outcome").select_option("denied")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator("#audit-results tbody tr").first).to_contain_text("auth.failed")
    for row in page.locator("#audit-results tbody tr").all():
        expect(row).to_contain_text("denied")
    page.get_by_role("button", name="Verify the chain").click()
    expect(page.locator("#chain-status")).to_contain_text("Intact")
    shoot(tab, "audit-filtered")


def test_principals_and_their_credentials_are_shown_once(tab: Tab, ui_server: Server, api: httpx.Client) -> None:
    page = tab.page
    sign_in(tab, ui_server.admin_token)
    go(tab, "Principals")
    page.get_by_text("Create a principal").click()
    create = page.get_by_role("form", name="Create a principal")
    create.get_by_label("Name", exact=True).fill("reporting")
    create.get_by_label("Role").select_option("auditor")
    create.get_by_role("button", name="Create principal").click()
    token = page.get_by_label("Token").input_value()
    with ui_server.client(token) as reporting:
        assert reporting.get("/v1/whoami").json()["role"] == "auditor"
    page.get_by_role("button", name="I have copied it").click()
    expect(page.get_by_label("Token")).to_have_count(0)
    assert token not in page.content()

    page.get_by_text("Create a principal").click()  # a KMIP key-store client (issue 37, item 1)
    create.get_by_label("Name", exact=True).fill("vsphere")
    create.get_by_label("Role").select_option("app")
    create.get_by_label("KMIP key store").check()
    create.get_by_role("button", name="Create principal").click()
    page.get_by_role("button", name="I have copied it").click()
    made = {p["name"]: p for p in api.get("/v1/principals").json()}["vsphere"]
    assert made["key_store"] is True and made["create_keys"] is True
    expect(page.get_by_role("row").filter(has_text="vsphere")).to_contain_text("yes, a KMIP key store")

    make_principal(api, "keyholder", "app")
    go(tab, "Keys")
    go(tab, "Principals")
    row = page.get_by_role("row").filter(has_text="keyholder")
    row.get_by_role("button", name="Show access keys").click()
    row.get_by_role("button", name="Create an access key for keyholder").click()
    secret = page.get_by_label("Secret access key").input_value()
    key_id = page.get_by_label("Access key id").input_value()
    assert len(secret) >= 40
    listed = api.get("/v1/principals/keyholder/access-keys").json()
    assert [k["access_key_id"] for k in listed] == [key_id]
    page.get_by_role("button", name="I have copied it").click()
    assert secret not in page.content()

    row = page.get_by_role("row").filter(has_text="keyholder")
    row.get_by_role("button", name="Delete principal keyholder").click()
    row.get_by_role("button", name="Confirm deleting principal keyholder").click()
    expect(page.get_by_role("status").filter(has_text="Principal keyholder deleted")).to_be_visible()
    assert "keyholder" not in [p["name"] for p in api.get("/v1/principals").json()]


def test_an_admin_downloads_the_import_parameters_of_an_external_key(
    tab: Tab, ui_server: Server, api: httpx.Client
) -> None:
    made = api.post("/v1/keys", json={"name": "brought", "policy": {}, "origin": "external"})
    assert made.status_code == 201, made.text
    page = tab.page
    sign_in(tab, ui_server.admin_token)
    page.get_by_role("link", name="brought").click()
    expect(page.get_by_role("heading", name="Import key material (BYOK)")).to_be_visible()
    offered = page.get_by_label("Wrapping algorithm").locator("option").all_inner_texts()
    assert "RSAES_OAEP_SHA_1" in offered
    with page.expect_download() as downloading:
        page.get_by_role("button", name="Download import parameters").click()
    download = downloading.value
    assert download.suggested_filename == "brought-import-parameters.json"
    parameters = json.loads(Path(download.path()).read_text())
    assert parameters["key_id"] == made.json()["id"] and parameters["wrapping_algorithm"] == offered[0]
    assert {"public_key", "import_token", "expires_at"} <= set(parameters)
    public_key = serialization.load_der_public_key(base64.b64decode(parameters["public_key"]))
    assert public_key.key_size == 2048  # the RSA wrapping key's public half: no key material of ours
    expect(page.get_by_role("status").filter(has_text="Import parameters downloaded")).to_be_visible()
    assert _records(api, key="brought")[0]["action"] == "key.import_parameters"


def test_a_guarded_change_says_it_awaits_approval(tab: Tab, ui_server: Server, api: httpx.Client) -> None:
    """Dual control (issue 40): the console does not take a 202 for a change made; it names the request."""
    assert api.post("/v1/keys", json={"name": "guarded", "policy": {}}).status_code == 201
    rules = {"rules": {"key.disable": {"approvals": 1}}}
    second = make_principal(api, "second-admin", "admin")
    assert api.put("/v1/keys/guarded/approval-rules", json=rules).status_code == 200
    page = tab.page
    sign_in(tab, ui_server.admin_token)
    page.get_by_role("link", name="guarded").click()
    page.get_by_role("button", name="Disable").click()
    expect(page.get_by_role("alert")).to_contain_text("approval pending: request")
    assert api.get("/v1/keys/guarded").json()["state"] == "enabled"
    key_id = api.get("/v1/keys/guarded").json()["id"]
    pending = [r for r in api.get("/v1/approvals", params={"state": "pending"}).json() if r["target"] == key_id]
    assert [r["operations"] for r in pending] == [["key.disable"]]

    page.get_by_role("button", name="Sign out").click()  # the second admin approves it in the console
    sign_in(tab, second)
    go(tab, "Approvals")
    expect(page.get_by_role("heading", level=1, name="Approvals")).to_be_visible()
    row = page.get_by_role("row").filter(has_text=key_id)
    expect(row).to_contain_text('"enabled":false')
    row.get_by_role("button", name=f"Approve request {pending[0]['id']}").click()
    expect(page.get_by_role("status").filter(has_text="Approved.")).to_be_visible()
    assert api.patch("/v1/keys/guarded", json={"enabled": False}).status_code == 200  # the same call runs now
    assert api.get(f"/v1/approvals/{pending[0]['id']}").json()["state"] == "executed"
