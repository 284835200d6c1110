"""The console's safety in the browser: an auditor's pages are read-only (and the API refuses
anyway), a wrong or revoked token goes back to sign-in with the reason, data is rendered as text
(HTML in a description, alias, tag or audit detail never becomes markup), and the
Content-Security-Policy holds in Chromium itself.
"""

from __future__ import annotations

import boto3
import httpx
import pytest
from botocore.config import Config
from playwright.sync_api import expect

from keymanager.doors.console.door import CONTENT_SECURITY_POLICY
from tests.e2e.conftest import Server
from tests.ui.conftest import Tab, go, make_principal, shoot, sign_in

pytestmark = pytest.mark.interop  # a browser drives the service: make test-interop

MARKUP = "<img src=x onerror=window.__pwned=1>"
"""Markup that runs script if it is ever parsed as HTML."""


def test_an_auditor_sees_every_page_read_only_and_the_api_refuses_anyway(
    tab: Tab, ui_server: Server, api: httpx.Client
) -> None:
    token = make_principal(api, "inspector", "auditor")
    assert api.post("/v1/keys", json={"name": "watched", "policy": {}}).status_code == 201
    page = tab.page
    sign_in(tab, token)
    expect(page.get_by_text("inspector (auditor)")).to_be_visible()
    expect(page.get_by_text("Create a key")).to_have_count(0)
    page.get_by_role("link", name="watched").click()
    expect(page.get_by_role("heading", name="Who can do what")).to_be_visible()
    for control in ("Rotate now", "Set minimum", "Save policy", "Schedule deletion", "Disable", "Enable"):
        expect(page.get_by_role("button", name=control)).to_have_count(0)
    expect(page.get_by_role("checkbox")).to_have_count(0)
    expect(page.get_by_role("heading", name="State")).to_have_count(0)
    shoot(tab, "auditor-key")
    go(tab, "Principals")
    expect(page.get_by_role("status")).to_contain_text("Only admins list and manage principals")
    expect(page.get_by_role("button", name="Create principal")).to_have_count(0)
    go(tab, "Audit")
    expect(page.get_by_role("button", name="Verify the chain")).to_be_visible()
    go(tab, "HSM and service")
    expect(page.get_by_role("heading", level=2, name="Mechanisms")).to_be_visible()

    tab.expect_errors("403")
    refused = page.evaluate(
        """async (token) => {
            const headers = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
            const answers = [];
            const tries = [
                ["POST", "/v1/keys/watched/rotate"],
                ["PATCH", "/v1/keys/watched", "{}"],
                ["POST", "/v1/keys", '{"name": "sneaky", "policy": {}}'],
                ["GET", "/v1/principals"],
            ];
            for (const [method, path, body] of tries) {
                const response = await fetch(path, { method, headers, body });
                answers.push([response.status, (await response.json()).error.code]);
            }
            return answers;
        }""",
        token,
    )
    assert refused == [[403, "forbidden"]] * 4
    assert api.get("/v1/keys/watched").json()["primary_version"] == 1
    assert api.get("/v1/keys/sneaky").status_code == 404


def test_a_wrong_token_stays_on_the_sign_in_page_with_the_reason(tab: Tab) -> None:
    page = tab.page
    tab.expect_errors("401")
    page.goto("/ui/")
    page.get_by_label("Bearer token").fill("km_not-a-token-at-all")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("The service refused this token (unauthenticated")
    expect(page.get_by_role("navigation", name="Sections")).to_be_hidden()
    shoot(tab, "sign-in-refused")


def test_a_revoked_token_returns_to_sign_in_with_the_reason(tab: Tab, ui_server: Server, api: httpx.Client) -> None:
    token = make_principal(api, "short-lived", "auditor")
    page = tab.page
    sign_in(tab, token)
    assert api.delete("/v1/principals/short-lived").status_code == 204
    tab.expect_errors("401")
    go(tab, "Audit")
    expect(page.get_by_role("alert")).to_contain_text("The service no longer accepts this credential (unauthenticated")
    expect(page.get_by_label("Bearer token")).to_be_visible()
    expect(page.get_by_role("navigation", name="Sections")).to_be_hidden()


def test_an_app_principal_is_turned_away(tab: Tab, api: httpx.Client) -> None:
    token = make_principal(api, "payments", "app")
    page = tab.page
    page.goto("/ui/")
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("The console is for admin and auditor principals")
    expect(page.get_by_role("navigation", name="Sections")).to_be_hidden()


def test_markup_in_descriptions_aliases_tags_and_audit_details_is_shown_as_text(
    tab: Tab, ui_server: Server, api: httpx.Client
) -> None:
    key = api.post("/v1/keys", json={"name": "marked", "policy": {}, "description": MARKUP}).json()
    pair = api.post("/v1/principals/admin/access-keys", json={}).json()
    kms = boto3.client(
        "kms",
        endpoint_url=ui_server.url,
        region_name="us-east-1",
        aws_access_key_id=pair["access_key_id"],
        aws_secret_access_key=pair["secret_access_key"],
        verify=str(ui_server.ca),
        config=Config(retries={"max_attempts": 1}),
    )
    kms.create_alias(AliasName="alias/marked-too", TargetKeyId=key["id"])
    tags = [{"TagKey": MARKUP, "TagValue": MARKUP}, {"TagKey": "team", "TagValue": "cards"}]
    kms.tag_resource(KeyId=key["id"], Tags=tags)
    page = tab.page
    sign_in(tab, ui_server.admin_token)
    page.get_by_label("Tag").fill("team=cards")
    rows = page.locator("main tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("marked-too")
    page.get_by_role("link", name="marked", exact=True).click()
    expect(page.locator("dd").filter(has_text=MARKUP)).to_have_count(1)
    expect(page.get_by_role("cell", name=MARKUP, exact=True)).to_have_count(2)  # the tag's key and value
    expect(page.locator("#aliases")).to_have_text("alias/marked-too")
    go(tab, "Audit")
    page.get_by_label("Action").fill("kms.TagResource")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.locator("#audit-results td.details").first).to_contain_text(MARKUP)
    assert page.locator("img").count() == 0
    assert page.evaluate("window.__pwned") is None
    shoot(tab, "markup-as-text")


def test_the_content_security_policy_holds_in_the_browser(tab: Tab, ui_server: Server) -> None:
    page = tab.page
    answer = page.goto("/ui/")
    assert answer is not None
    headers = answer.headers
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    for directive in ("script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "style-src 'self'"):
        assert directive in headers["content-security-policy"]
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    tab.expect_errors("TrustedHTML", "TrustedScript", "frame-ancestors")
    refused = page.evaluate(
        """() => {
            const tries = {
                innerHTML: () => { document.body.innerHTML = "<b>markup</b>"; },
                inlineScript: () => {
                    const s = document.createElement("script");
                    s.textContent = "window.__ran = 1";
                    document.body.append(s);
                },
            };
            const outcome = {};
            for (const [name, attempt] of Object.entries(tries)) {
                try { attempt(); outcome[name] = "allowed"; } catch (error) { outcome[name] = error.name; }
            }
            return outcome;
        }"""
    )
    assert refused["innerHTML"] == "TypeError"
    assert refused["inlineScript"] == "TypeError"
    assert page.evaluate("window.__ran") is None
    framing = page.context.new_page()
    framing.set_content(f'<iframe src="{ui_server.url}/ui/"></iframe>')  # waits for the frame's load
    framed = framing.frames[-1]
    assert framed.url.startswith("chrome-error://")  # frame-ancestors 'none': Chromium refused to show it
    framing.close()
