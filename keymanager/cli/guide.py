"""What ``keymanager serve`` prints after its ready line in development: the next three things to do."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from keymanager.config import Settings


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when it is inside it (as a user would type it)."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def next_steps(settings: Settings, url: str) -> str:
    """Three numbered lines: a health check with curl, where the admin token is, how to run kmctl
    (the exact path of the installed one, or how to install it)."""
    ca = _shown(settings.tls_dir / "ca.pem") if settings.tls_cert is None else None
    cacert = f"--cacert {ca} " if ca else ""
    kmctl = Path(sys.executable).parent / "kmctl"
    profile, token = _shown(settings.var_dir / "kmctl.toml"), _shown(settings.var_dir / "admin.token")
    if os.access(kmctl, os.X_OK):
        use = f"{_shown(kmctl)} keys list   (it reads {profile}; or put {_shown(kmctl.parent)} on PATH)"
    else:
        use = f"'make sdk' installs it into .venv, then: .venv/bin/kmctl keys list (it reads {profile})"
    return "\n".join(
        [
            "next:",
            f"  1. check it:        curl {cacert}{url}/v1/health",
            f"  2. the admin token: {token} (for curl: ADMIN=$(cat {token}))",
            f"  3. kmctl:           {use}",
        ]
    )
