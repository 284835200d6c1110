"""``keymanager serve`` says what is wrong at start in one line, and "serving" only once ready."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import E2E_PIN, free_port, keymanager, server_env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """An initialised var dir (token, schema, TLS) that no server uses yet."""
    home = tmp_path_factory.mktemp("startup")
    env = server_env(home / "var")
    init = keymanager("init", env=env, cwd=home)
    assert init.returncode == 0, init.stderr
    yield home, env


def _serve(home: Path, env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "keymanager.cli.main", "serve", "--port", str(free_port())],
        env={**env, **extra},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_clear_line(run: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("keymanager cannot start: ")
    for words in expected:
        assert words in lines[0]
    assert "Traceback" not in run.stdout + run.stderr
    assert "serving" not in run.stdout
    return lines[0]


def test_a_database_that_does_not_answer(installed: tuple[Path, dict[str, str]]) -> None:
    home, env = installed
    url = f"postgresql+psycopg://km:db-password-77@127.0.0.1:{free_port()}/km"
    line = _one_clear_line(_serve(home, env, KM_DATABASE_URL=url), "database", "unavailable", "***@127.0.0.1")
    assert "db-password-77" not in line


def test_a_wrong_pin(installed: tuple[Path, dict[str, str]]) -> None:
    home, env = installed
    run = _serve(home, env, KM_PKCS11_PIN="wrong-pin-31337")
    _one_clear_line(run, "HSM", "PIN", "incorrect")
    assert "wrong-pin-31337" not in run.stdout + run.stderr


def test_a_token_that_does_not_exist(installed: tuple[Path, dict[str, str]]) -> None:
    home, env = installed
    _one_clear_line(_serve(home, env, KM_PKCS11_TOKEN_LABEL="no-such-token"), "HSM", "no-such-token")


def test_a_module_that_cannot_be_loaded(installed: tuple[Path, dict[str, str]]) -> None:
    home, env = installed
    _one_clear_line(_serve(home, env, KM_PKCS11_MODULE=str(home / "missing.so")), "HSM", "cannot be loaded")


def test_serving_is_printed_once_ready(installed: tuple[Path, dict[str, str]]) -> None:
    home, env = installed
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "keymanager.cli.main", "serve", "--port", str(port)],
        env=env,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the announcement (or the process ends)
        assert line.startswith(f"keymanager serving https://127.0.0.1:{port} "), line
        guide = [process.stdout.readline().rstrip() for _ in range(4)]  # development: what to do next
        assert guide[0] == "next:"
        assert guide[1].endswith(f"curl --cacert var/tls/ca.pem https://127.0.0.1:{port}/v1/health"), guide
        assert "var/admin.token" in guide[2] and "kmctl keys list" in guide[3] and "var/kmctl.toml" in guide[3]
        ca = home / "var" / "tls" / "ca.pem"
        assert httpx.get(f"https://127.0.0.1:{port}/v1/ready", verify=str(ca), timeout=5).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert E2E_PIN not in (process.stderr.read() if process.stderr else "")
