"""The kmctl profile of the local service, written by ``keymanager init``.

``<var_dir>/kmctl.toml`` holds one table, ``[default]``, with the service's URL on this machine,
the admin token file and (with the development PKI) the CA that signed the server's
certificate. kmctl reads ``var/kmctl.toml`` when it runs in the checkout, so the first
``kmctl keys list`` needs no variable. The file names the token file; it holds no secret.
"""

from __future__ import annotations

import json
from pathlib import Path

from keymanager.cli.startup import loopback
from keymanager.config import Settings

PROFILE_NAME = "kmctl.toml"


def write_kmctl_profile(settings: Settings, token_file: Path, ca: Path | None) -> Path:
    """Write (or rewrite, so a changed ``KM_PORT`` is followed) the profile; its path.

    ``ca`` None (certificates of one's own, ``KM_TLS_CERT``): no ``ca`` line, the system's CAs apply.
    """
    lines = [
        "# kmctl's profile for the local keymanager, written by `keymanager init` (no secret in it).",
        "[default]",
        f"url = {_toml(f'https://{loopback(settings.host)}:{settings.port}')}",
        f"token_file = {_toml(str(token_file.resolve()))}",
    ]
    if ca is not None:
        lines.append(f"ca = {_toml(str(ca.resolve()))}")
    path = settings.var_dir / PROFILE_NAME
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)
