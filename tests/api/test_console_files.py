"""The web console's static files at ``/ui/`` (``doors/console/door.py``): served with ``KM_UI`` (on in
development, off in production unless set), without a credential, each answer under the strict
Content-Security-Policy; every file of ``keymanager/ui`` shipped in the package; and the sources
keep the rules the policy cannot check alone (no markup from strings, no storage, no other host).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.config import Settings
from keymanager.doors.console.door import CONTENT_SECURITY_POLICY, SECURITY_HEADERS
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "keymanager" / "ui"
SOURCES = sorted(p for p in UI.rglob("*") if p.is_file())


def _client(settings: Settings, hsm: Hsm) -> Iterator[TestClient]:
    services = Services.build(settings, hsm=hsm)
    try:
        with TestClient(create_app(services=services), base_url="https://testserver") as client:
            yield client
    finally:
        services.close()


@pytest.fixture
def off(tmp_path: Path, hsm: Hsm) -> Iterator[TestClient]:
    yield from _client(make_settings(tmp_path / "var", ui=False), hsm)


def _secured(headers: dict[str, str] | object) -> None:
    for name, value in SECURITY_HEADERS:
        assert headers[name.decode()] == value.decode(), name  # type: ignore[index]


def test_the_console_is_served_without_a_credential_under_the_policy(client: TestClient) -> None:
    moved = client.get("/ui", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/ui/"
    index = client.get("/ui/")
    assert index.status_code == 200 and index.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="/ui/js/app.js"></script>' in index.text
    _secured(index.headers)
    assert "x-request-id" in index.headers
    script = client.get("/ui/js/pages/key.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    _secured(script.headers)
    assert client.get("/ui/console.css").headers["content-type"].startswith("text/css")
    assert client.get("/ui/console.json").json() == {"development_tls": True, "client_certificates": False}


def test_caching_head_and_refusals(client: TestClient) -> None:
    first = client.get("/ui/js/app.js")
    again = client.get("/ui/js/app.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    head = client.head("/ui/js/app.js")
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(len(first.content))
    missing = client.get("/ui/js/nothing.js")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    _secured(missing.headers)
    for path in ("/ui/../keymanager/config.py", "/ui/js/../../config.py", "/ui/%2e%2e/config.py"):
        assert client.get(path).status_code in (404, 401), path
    posted = client.post("/ui/", content=b"x")
    assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
    _secured(posted.headers)


def test_off_with_km_ui_false_and_by_default_in_production(off: TestClient) -> None:
    answer = off.get("/ui/")
    assert answer.status_code == 401  # not served: the front door asks for a credential, as for any path
    assert "content-security-policy" not in answer.headers
    assert not Settings(env="production", pkcs11_pin="a-production-pin").ui_enabled()
    assert Settings(env="production", pkcs11_pin="a-production-pin", ui=True).ui_enabled()
    assert Settings().ui_enabled()


def test_the_policy_allows_nothing_inline_and_nothing_from_another_host() -> None:
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == directives["style-src"] == directives["connect-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["trusted-types"] == "'none'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY


def test_every_file_of_the_console_is_served_and_shipped_in_the_package(client: TestClient) -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["keymanager"]
    for path in SOURCES:
        relative = path.relative_to(UI).as_posix()
        assert any(fnmatch(f"ui/{relative}", pattern) for pattern in patterns), relative
        answer = client.get(f"/ui/{relative}")
        assert answer.status_code == 200 and answer.content == path.read_bytes(), relative


@pytest.mark.parametrize("path", [p for p in SOURCES if p.suffix == ".js"], ids=lambda p: p.name)
def test_scripts_build_no_markup_from_strings_and_keep_no_credential(path: Path) -> None:
    source = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M)  # the code, without its comments
    for forbidden in (
        "innerHTML",
        "outerHTML =",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "localStorage",
        "sessionStorage",
        "document.cookie",
        "indexedDB",
    ):
        assert forbidden not in source, (path.name, forbidden)
    for module in re.findall(r'from "(\.[^"]+)"', source):
        assert (path.parent / module).resolve().is_file(), (path.name, module)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_nothing_is_loaded_from_another_host(path: Path) -> None:
    source = path.read_text()
    assert not re.search(r"https?://", source), path.name
    assert "@import" not in source and "url(" not in source, path.name
    if path.suffix == ".html":
        assert re.findall(r"<script[^>]*>(.*?)</script>", source, re.S) == [""]  # one script, no inline code
        assert " style=" not in source and "<style" not in source
        assert not re.search(r"<[^>]+\son[a-z]+=", source)  # no inline event handler
