"""The console for everyone and every way in: keyboard-only use of the key page, an
accessibility check of every page (names, labels, headings, tables, contrast, and Playwright's
accessibility snapshot), the key list's page weight, and sign-in with a client certificate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import Server, keymanager
from tests.ui.conftest import SCREENSHOTS, Tab, go, make_principal, sign_in

pytestmark = pytest.mark.interop  # a browser drives the service: make test-interop

ACCESSIBILITY = Path(__file__).with_name("accessibility.js").read_text()
"""The page-side checks (see that file): every problem found, as text."""


def _tab_to(tab: Tab, name: str, limit: int = 120) -> None:
    """Press Tab until the focused element's accessible text is ``name`` (at most ``limit`` presses),
    checking every element focused on the way shows a focus indicator."""
    page = tab.page
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused: dict[str, Any] = page.evaluate(
            """() => {
                const el = document.activeElement;
                const style = getComputedStyle(el);
                const name = (el.getAttribute("aria-label") || el.textContent || "").trim();
                return { name, outline: style.outlineStyle, tag: el.tagName, html: el.outerHTML.slice(0, 120) };
            }"""
        )
        if focused["tag"] != "BODY":
            assert focused["outline"] != "none", focused
        if focused["name"] == name:
            return
    raise AssertionError(f"{name!r} not reached with {limit} presses of Tab")


def test_the_key_page_works_with_the_keyboard_alone(tab: Tab, ui_server: Server, api: httpx.Client) -> None:
    assert api.post("/v1/keys", json={"name": "keyboard", "policy": {}}).status_code == 201
    make_principal(api, "typist", "app")
    page = tab.page
    page.goto("/ui/")
    expect(page.get_by_label("Bearer token")).to_be_focused()
    page.keyboard.type(ui_server.admin_token)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1, name="Keys")).to_be_focused()
    _tab_to(tab, "keyboard")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("keyboard")
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    _tab_to(tab, "Rotate now")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Rotated")).to_be_visible()
    _tab_to(tab, "typist may encrypt")
    page.keyboard.press("Space")
    expect(page.locator("#policy-preview")).to_contain_text("typist: encrypt")
    _tab_to(tab, "Save policy")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Policy saved.")).to_be_visible()
    key = api.get("/v1/keys/keyboard").json()
    assert key["primary_version"] == 2 and key["policy"]["encrypt"] == ["typist"]


def _check_page(tab: Tab, name: str) -> None:
    """The accessibility checks on the page shown, and its accessibility snapshot kept beside the screenshots."""
    problems: list[str] = tab.page.evaluate(ACCESSIBILITY)
    assert problems == [], (name, problems)
    snapshot = tab.page.locator("body").aria_snapshot()
    assert "heading" in snapshot and "img" not in snapshot, snapshot
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / f"{name}.aria.yaml").write_text(snapshot)


def test_every_page_passes_the_accessibility_checks(tab: Tab, ui_server: Server, api: httpx.Client) -> None:
    assert api.post("/v1/keys", json={"name": "readable", "policy": {}}).status_code == 201
    page = tab.page
    page.goto("/ui/")
    expect(page.get_by_label("Bearer token")).to_be_visible()
    _check_page(tab, "sign-in")
    sign_in(tab, ui_server.admin_token)
    page.get_by_text("Create a key").click()
    _check_page(tab, "keys")
    page.get_by_role("link", name="readable").click()
    expect(page.get_by_role("heading", name="Who can do what")).to_be_visible()
    _check_page(tab, "key")
    sections = (
        ("Principals", "Principals"),
        ("Approvals", "Approvals"),
        ("Audit", "Audit log"),
        ("HSM and service", "HSM and service"),
    )
    for section, heading in sections:
        go(tab, section)
        expect(page.get_by_role("heading", level=1, name=heading)).to_be_visible()
        if section == "Principals":
            page.get_by_text("Create a principal").click()
        _check_page(tab, section.lower().replace(" ", "-"))


def test_the_accessibility_checks_find_what_they_look_for(tab: Tab) -> None:
    """The checks fail a page with an unlabelled field, a nameless button, faint text and a skipped heading."""
    tab.page.goto("/ui/")
    expect(tab.page.get_by_label("Bearer token")).to_be_visible()
    tab.page.evaluate(
        """() => {
            const main = document.getElementById("main");
            main.append(document.createElement("input"), document.createElement("button"));
            const faint = document.createElement("p");
            faint.textContent = "faint";
            faint.className = "faint-test";
            main.append(faint, document.createElement("h4"));
            main.lastChild.textContent = "deep";
            const sheet = new CSSStyleSheet();
            sheet.replaceSync(".faint-test { color: #d8d8d8; }");
            document.adoptedStyleSheets = [sheet];
        }"""
    )
    problems = "\n".join(tab.page.evaluate(ACCESSIBILITY))
    for expected in ("no accessible name: <input", "no accessible name: <button", "contrast", "heading level"):
        assert expected in problems, problems


def test_the_key_list_page_weight(browser: Any, ui_server: Server, api: httpx.Client) -> None:
    """Bytes on the wire (headers and bodies, as Chromium counts them) from opening the console to
    the key list shown, sign-in included, with 25 keys; kept in ``var/ui-screenshots/page-weight.json``."""
    for n in range(25):
        assert api.post("/v1/keys", json={"name": f"weighed-{n:02d}", "policy": {}}).status_code == 201
    context = browser.new_context(base_url=ui_server.url)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    sizes: dict[str, int] = {}
    urls: dict[str, str] = {}
    cdp.on("Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"]))
    cdp.on("Network.loadingFinished", lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])))
    try:
        page.goto("/ui/")
        page.get_by_label("Bearer token").fill(ui_server.admin_token)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("link", name="weighed-00")).to_be_visible()
        page.wait_for_load_state("networkidle")
        by_url = {urls[r].removeprefix(ui_server.url): size for r, size in sizes.items() if r in urls}
    finally:
        context.close()
    total = sum(by_url.values())
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    report = {"total_bytes": total, "requests": len(by_url), "by_url": dict(sorted(by_url.items()))}
    (SCREENSHOTS / "page-weight.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    assert "/v1/inventory/keys" in by_url and "/ui/js/app.js" in by_url
    assert not [u for u in by_url if not u.startswith("/")], by_url  # nothing from another host
    assert total < 250_000, report


def test_sign_in_with_a_client_certificate(browser: Any, ui_server: Server, api: httpx.Client, tmp_path: Path) -> None:
    home = ui_server.var_dir.parent
    issued = keymanager("dev-cert", "console-user", "--out", str(tmp_path), env=ui_server.env, cwd=home)
    assert issued.returncode == 0, issued.stderr
    subject = next(line.split(":", 1)[1].strip() for line in issued.stdout.splitlines() if line.startswith("subject:"))
    made = api.post("/v1/principals", json={"name": "console-user", "role": "auditor", "cert_subject": subject})
    assert made.status_code == 201, made.text
    certificate = {
        "origin": ui_server.url,
        "certPath": str(tmp_path / "client-console-user.pem"),
        "keyPath": str(tmp_path / "client-console-user-key.pem"),
    }
    context = browser.new_context(base_url=ui_server.url, client_certificates=[certificate])
    try:
        page = context.new_page()
        page.goto("/ui/")
        page.get_by_role("button", name="Use my client certificate").click()
        expect(page.get_by_role("heading", level=1, name="Keys")).to_be_visible()
        expect(page.get_by_text("console-user (auditor)")).to_be_visible()
    finally:
        context.close()
