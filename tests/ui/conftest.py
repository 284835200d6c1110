"""The web console in a real browser: Playwright (PyPI) driving Debian's Chromium against a real
``keymanager serve`` over TLS (``tests/e2e/conftest.py``'s ``running_server``).

Chromium is ``/usr/bin/chromium`` (``apt-get install chromium``); Playwright never downloads a
browser here. It trusts the server's certificate by its public key alone
(``--ignore-certificate-errors-spki-list``: the SHA-256 of the development certificate's
SubjectPublicKeyInfo), so the connection is real TLS to that one key (a context given a client
certificate connects through Playwright's driver, which verifies the server against the development
CA: ``NODE_EXTRA_CA_CERTS``). Each test gets a fresh
browser context (no storage shared) whose console errors, uncaught exceptions and failed requests
are collected; a test fails on any it did not expect (:class:`Tab`). Screenshots go to
``var/ui-screenshots/``.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from playwright import sync_api as playwright_api

from tests.e2e.conftest import ROOT, Server, running_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "var" / "ui-screenshots"
DEADLINE_MS = 15_000
"""What any one wait of a test for the page may take (actions' and ``expect``'s timeout here: the
machine is shared, and an idle page answers in well under a second)."""
playwright_api.expect.set_options(timeout=DEADLINE_MS)


def spki_pin(certificate: Path) -> str:
    """Base64 of the SHA-256 of the certificate's SubjectPublicKeyInfo (Chromium's SPKI list form)."""
    cert = x509.load_pem_x509_certificate(certificate.read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


@dataclass
class Tab:
    """One browser page with what went wrong in it: console errors, uncaught exceptions, failed
    requests (status 400 and above, or none). ``expect_errors`` names text an expected error holds."""

    page: Any
    errors: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)

    def expect_errors(self, *fragments: str) -> None:
        self.expected.extend(fragments)

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(f in e for f in self.expected)]


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own for the console's tests (one worker: every read sees the same process)."""
    with running_server(tmp_path_factory.mktemp("ui"), workers=1) as server:
        yield server


@pytest.fixture(scope="module")
def browser(ui_server: Server) -> Iterator[Any]:
    assert CHROMIUM.exists(), "Debian's chromium is needed: apt-get install -y chromium"
    pin = spki_pin(ui_server.var_dir / "tls" / "server.pem")
    # Playwright's driver (Node) makes the TLS connections of contexts given client certificates:
    # it verifies the server against the development CA.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NODE_EXTRA_CA_CERTS", str(ui_server.ca))
        with playwright_api.sync_playwright() as playwright:
            launched = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, f"--ignore-certificate-errors-spki-list={pin}"]
            )
            try:
                yield launched
            finally:
                launched.close()


@pytest.fixture
def tab(browser: Any, ui_server: Server) -> Iterator[Tab]:
    """A fresh context and page at the server's origin; fails the test on an unexpected error."""
    context = browser.new_context(base_url=ui_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEADLINE_MS)
    page = context.new_page()
    found = Tab(page)
    page.on("console", lambda message: message.type == "error" and found.errors.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: found.errors.append(f"exception: {error}"))
    page.on("requestfailed", lambda request: found.errors.append(f"failed: {request.url} {request.failure}"))
    page.on(
        "response", lambda r: r.status >= 400 and found.errors.append(f"status {r.status}: {r.request.method} {r.url}")
    )
    try:
        yield found
    finally:
        context.close()
    assert not found.unexpected(), found.unexpected()


@pytest.fixture(scope="module")
def api(ui_server: Server) -> Iterator[httpx.Client]:
    """The admin's REST client, outside the browser (to set up and to check what the page did)."""
    with ui_server.client(ui_server.admin_token) as client:
        yield client


def make_principal(api: httpx.Client, name: str, role: str) -> str:
    """A new principal's token."""
    made = api.post("/v1/principals", json={"name": name, "role": role})
    assert made.status_code == 201, made.text
    return str(made.json()["token"])


def sign_in(tab: Tab, token: str) -> None:
    """Open the console and sign in with ``token``; waits for the key list."""
    page = tab.page
    page.goto("/ui/")
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", level=1, name="Keys").wait_for()


def go(tab: Tab, section: str) -> None:
    """Follow the navigation's link to ``section``."""
    tab.page.get_by_role("navigation", name="Sections").get_by_role("link", name=section, exact=True).click()


def shoot(tab: Tab, name: str) -> Path:
    """A full-page screenshot under ``var/ui-screenshots/``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    tab.page.screenshot(path=str(path), full_page=True)
    return path
