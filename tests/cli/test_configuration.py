"""Configuration errors stop the command with a clear message and never echo a PIN."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def keymanager(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KM_")}
    return subprocess.run(
        [sys.executable, "-m", "keymanager.cli.main", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=180,  # a Python start-up and the service's imports, on a machine possibly shared
        check=False,
    )


def test_production_refuses_the_development_pin_without_printing_it() -> None:
    run = keymanager("audit", "verify", KM_ENV="production", KM_PKCS11_PIN="km-dev-pin")
    assert run.returncode == 2
    assert "refuses the development PKCS#11 PIN" in run.stderr
    assert "km-dev-pin" not in run.stdout + run.stderr


@pytest.mark.parametrize("command", [("serve",), ("audit", "verify"), ("init",)])
def test_a_bad_setting_is_named_and_no_pin_is_echoed(command: tuple[str, ...]) -> None:
    run = keymanager(*command, KM_PORT="not-a-port", KM_PKCS11_PIN="pin-that-must-not-leak-4821")
    assert run.returncode == 2
    assert "configuration error: port:" in run.stderr
    assert "pin-that-must-not-leak-4821" not in run.stdout + run.stderr
