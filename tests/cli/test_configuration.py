"""Configuration errors stop the command with a clear message and never echo a PIN; so does a ``KM_``
variable that names no setting."""

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


@pytest.mark.parametrize("command", [("serve",), ("audit", "verify"), ("init",), ("dev-cert", "someone")])
def test_an_unknown_km_variable_stops_the_command_naming_the_closest_setting(command: tuple[str, ...]) -> None:
    """``KM_DATABSE_URL`` was ignored: the service started on SQLite (issue 41, item 7)."""
    run = keymanager(*command, KM_DATABSE_URL="postgresql://u:secret-4821@db/km", km_prot="1", KM_FROBNICATE="x")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "configuration error: KM_DATABSE_URL is not a setting: did you mean KM_DATABASE_URL?" in run.stderr
    assert "configuration error: km_prot is not a setting: did you mean KM_PORT?" in run.stderr
    assert "configuration error: KM_FROBNICATE is not a setting: see docs/configuration.md" in run.stderr
    assert "secret-4821" not in run.stdout + run.stderr


def test_the_clients_and_the_tools_km_variables_are_left_alone() -> None:
    names = ("KM_URL", "KM_TOKEN", "KM_CA", "KM_ADMIN_TOKEN", "KM_TEST_ANYTHING", "KM_BENCH_X")
    foreign = dict.fromkeys(names, "x")
    run = keymanager("audit", "verify", "--checkpoint", "no checkpoint here", **foreign)
    assert run.returncode == 2 and "no 'audit checkpoint chains=…' line" in run.stderr, run.stderr
    assert "is not a setting" not in run.stderr
