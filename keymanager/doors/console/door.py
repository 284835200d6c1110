"""The web console's static files at ``/ui/`` (``KM_UI``), under a strict Content-Security-Policy.

The files are the package's own (``keymanager/ui/``: HTML, ES modules, CSS, no build step), read
once when the app is made and kept in memory (a few tens of KiB), each with a strong ``ETag``.
The console is a client of the REST API with the API's own credentials: nothing here reads a
credential, and nothing is stored per caller. The gateway hands this door every request whose
path is ``/ui`` or starts with ``/ui/``, before the front door (the sign-in page needs no
principal); ``/ui`` redirects to ``/ui/``, which is ``index.html``; ``/ui/console.json`` is what
the page must know before sign-in (whether the service runs development TLS, whether it asks for
client certificates). Only GET and HEAD are served (405 otherwise), an unknown file is 404.

Every answer carries :data:`SECURITY_HEADERS`: scripts, styles, images and connections from this
origin only, no inline script or style, no frames around it, no ``innerHTML`` from strings
(Trusted Types), no referrer, no sniffing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources

from starlette.types import Receive, Scope, Send

from keymanager.api.errors import error_response
from keymanager.config import Settings

PREFIX = "/ui"
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)
"""No inline script or style, nothing from another host, no frame around the console, and no
string turned into markup (``innerHTML`` with a string throws under ``trusted-types 'none'``)."""
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-cache"),
)
_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".png": b"image/png",
    ".svg": b"image/svg+xml",
    ".json": b"application/json",
}


@dataclass(frozen=True)
class StaticFile:
    """One file of the console: its bytes, type and ``ETag``."""

    body: bytes
    content_type: bytes
    etag: bytes

    @classmethod
    def of(cls, name: str, body: bytes) -> StaticFile:
        suffix = name[name.rfind(".") :]
        return cls(body, _TYPES[suffix], b'"' + hashlib.sha256(body).hexdigest()[:32].encode() + b'"')


def console_files(settings: Settings) -> dict[str, StaticFile]:
    """Every file the console serves, by path under ``/ui/`` (``""`` is ``index.html``): the
    package's ``keymanager/ui`` files of a known type, and ``console.json``."""
    files: dict[str, StaticFile] = {}
    root = resources.files("keymanager") / "ui"
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        for entry in folder.iterdir():
            if entry.is_dir():
                pending.append((entry, f"{prefix}{entry.name}/"))
            elif any(entry.name.endswith(suffix) for suffix in _TYPES):
                files[prefix + entry.name] = StaticFile.of(entry.name, entry.read_bytes())
    files[""] = files["index.html"]
    facts = {"development_tls": settings.development_tls, "client_certificates": settings.tls_client_ca is not None}
    files["console.json"] = StaticFile.of("console.json", json.dumps(facts).encode())
    return files


def is_console_path(path: str) -> bool:
    """Whether the console answers ``path``."""
    return path == PREFIX or path.startswith(PREFIX + "/")


class ConsoleDoor:
    """The ASGI app that answers the console's paths (see the module docstring)."""

    def __init__(self, files: dict[str, StaticFile]) -> None:
        self.files = files

    @staticmethod
    def owns(scope: Scope) -> bool:
        """Whether the request ``scope`` is this door's (:func:`is_console_path`)."""
        return is_console_path(scope["path"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = str(scope.get("state", {}).get("request_id", ""))
        path, method = scope["path"], scope["method"]
        if method not in ("GET", "HEAD"):
            response = error_response(405, "method_not_allowed", "the console serves GET and HEAD", request_id)
            response.headers["allow"] = "GET, HEAD"
            await _with_security_headers(response.raw_headers, response.status_code, response.body, send)
            return
        if path == PREFIX:
            await _with_security_headers([(b"location", b"/ui/")], 308, b"", send)
            return
        found = self.files.get(path[len(PREFIX) + 1 :])
        if found is None:
            response = error_response(404, "not_found", "no such page of the console", request_id)
            await _with_security_headers(response.raw_headers, 404, response.body, send)
            return
        headers = [(b"content-type", found.content_type), (b"etag", found.etag)]
        if _header(scope, b"if-none-match") == found.etag:
            await _with_security_headers(headers, 304, b"", send)
            return
        headers.append((b"content-length", str(len(found.body)).encode()))
        await _with_security_headers(headers, 200, b"" if method == "HEAD" else found.body, send)


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope["headers"] if key.lower() == name), None)


async def _with_security_headers(
    headers: list[tuple[bytes, bytes]], status: int, body: bytes | memoryview, send: Send
) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
