"""The environment a run was measured in: machine, versions, TLS negotiated, worker counts."""

from __future__ import annotations

import os
import platform
import socket
import ssl
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

PACKAGES = ("keymanager", "keymanager-sdk", "boto3", "botocore", "moto", "aws-encryption-sdk", "httpx", "cryptography",
            "uvicorn", "pykmip")  # fmt: skip


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that matter (None: not installed)."""
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def tls_session(url: str, ca: str | None, cert: tuple[str, str] | None = None) -> dict[str, str | None]:
    """The TLS version and cipher a client negotiates with ``url`` (empty for plain HTTP)."""
    parts = urlsplit(url)
    if parts.scheme != "https":
        return {"version": None, "cipher": None}
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(*cert)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    with socket.create_connection((host, port), timeout=5) as raw, context.wrap_socket(raw, server_hostname=host) as s:
        cipher = s.cipher()
        return {"version": s.version(), "cipher": cipher[0] if cipher else None}


def describe(url: str | None = None, ca: str | None = None, **extra: Any) -> dict[str, Any]:
    """Everything about the machine and software a reader needs to compare figures."""
    memory = psutil.virtual_memory().total
    found: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_gb": round(memory / 1e9, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": package_versions(),
    }
    if url:
        found["service_url"] = url
        try:
            found["tls"] = tls_session(url, ca)
        except OSError as exc:
            found["tls"] = {"error": str(exc)}
    found.update(extra)
    return found
