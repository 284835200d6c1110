"""Provisioning of the SoftHSM development token, each PKCS#11 check in a fresh subprocess.

SoftHSM reads ``SOFTHSM2_CONF`` once per process when the library is initialised, so every
check that touches PKCS#11 runs in its own interpreter with its own configuration; the test
process itself never initialises the library here.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from keymanager.config import SOFTHSM_MODULE
from keymanager.hsm.softhsm import ensure_softhsm_token, write_softhsm_conf

ROOT = Path(__file__).resolve().parents[2]
LABEL = "km-test"
PIN = "test-user-pin-0147"
SO_PIN = "test-so-pin-0258"

pytestmark = pytest.mark.softhsm  # never skipped: without SoftHSM these tests fail

_SCRIPT = """
import json, sys
from pathlib import Path
import pkcs11
from keymanager.hsm.softhsm import ensure_softhsm_token

module, label, pin, so_pin, conf, calls = sys.argv[1:7]
result = {
    "created": [ensure_softhsm_token(module, label, pin, so_pin, Path(conf)) for _ in range(int(calls))]
}
try:
    token = pkcs11.lib(module).get_token(token_label=label)
    result["exists"] = True
except pkcs11.NoSuchToken:
    result["exists"] = False
if result["exists"]:
    with token.open(user_pin=pin):
        result["login"] = True
    try:
        token.open(user_pin=pin + "-wrong")
        result["wrong_pin_refused"] = False
    except pkcs11.PinIncorrect:
        result["wrong_pin_refused"] = True
print(json.dumps(result))
"""


def _python(script: str, conf: Path, *extra: str, env_conf: Path | None) -> str:
    """Run ``script`` in a fresh interpreter with argv module, label, PIN, SO PIN, conf, *extra
    and SOFTHSM2_CONF set to ``env_conf`` (unset if None); return its standard output."""
    env = {k: v for k, v in os.environ.items() if k != "SOFTHSM2_CONF"}
    env["PYTHONPATH"] = str(ROOT)
    if env_conf is not None:
        env["SOFTHSM2_CONF"] = str(env_conf)
    # The PINs travel in argv here only because this is a throwaway test token.
    args = [SOFTHSM_MODULE, LABEL, PIN, SO_PIN, str(conf), *extra]
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert PIN not in proc.stdout + proc.stderr and SO_PIN not in proc.stdout + proc.stderr
    return proc.stdout


def _run(conf: Path, *, calls: int, env_conf: Path | None = None) -> dict[str, object]:
    """Run _SCRIPT: ``calls`` times ensure_softhsm_token, then the token checks."""
    result: dict[str, object] = json.loads(_python(_SCRIPT, conf, str(calls), env_conf=env_conf))
    return result


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "softhsm2.conf"
    write_softhsm_conf(path, tmp_path / "tokens")
    return path


def test_write_softhsm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "var" / "softhsm2.conf"
    write_softhsm_conf(conf, tmp_path / "var" / "tokens")
    assert conf.read_text().splitlines()[1:] == [
        f"directories.tokendir = {tmp_path / 'var' / 'tokens'}",
        "objectstore.backend = file",
        "log.level = ERROR",
    ]
    assert stat.S_IMODE((tmp_path / "var" / "tokens").stat().st_mode) == 0o700
    before = conf.stat().st_mtime_ns
    write_softhsm_conf(conf, tmp_path / "var" / "tokens")
    assert conf.stat().st_mtime_ns == before


def test_write_softhsm_conf_creates_the_token_directory_and_its_parent_private(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        write_softhsm_conf(tmp_path / "var" / "softhsm2.conf", tmp_path / "var" / "softhsm" / "tokens")
    finally:
        os.umask(old)
    for directory in (tmp_path / "var" / "softhsm", tmp_path / "var" / "softhsm" / "tokens"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert stat.S_IMODE((tmp_path / "var" / "softhsm2.conf").stat().st_mode) == 0o600


def test_write_softhsm_conf_uses_an_absolute_token_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_softhsm_conf(Path("softhsm2.conf"), Path("tokens"))
    assert f"directories.tokendir = {tmp_path / 'tokens'}\n" in Path("softhsm2.conf").read_text()


def test_creates_the_token_once(conf: Path, tmp_path: Path) -> None:
    assert _run(conf, calls=0, env_conf=conf) == {"created": [], "exists": False}
    first = _run(conf, calls=2)  # SOFTHSM2_CONF unset: ensure_softhsm_token sets it
    assert first == {"created": [True, False], "exists": True, "login": True, "wrong_pin_refused": True}
    assert list((tmp_path / "tokens").iterdir()), "the token must be in the configured directory"
    again = _run(conf, calls=1)
    assert again == {"created": [False], "exists": True, "login": True, "wrong_pin_refused": True}


def test_an_existing_softhsm2_conf_wins(conf: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.conf"
    write_softhsm_conf(other, tmp_path / "other-tokens")
    assert _run(conf, calls=1, env_conf=other)["created"] == [True]
    assert list((tmp_path / "other-tokens").iterdir())
    assert not list((tmp_path / "tokens").iterdir())


def test_missing_module_is_a_clear_error(conf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOFTHSM2_CONF", str(conf))  # so the call leaves the environment alone
    with pytest.raises(RuntimeError, match="apt-get install softhsm2") as info:
        ensure_softhsm_token("/nonexistent/libsofthsm2.so", LABEL, PIN, SO_PIN, conf)
    assert PIN not in str(info.value) and SO_PIN not in str(info.value)


def test_a_bad_label_is_refused(conf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOFTHSM2_CONF", str(conf))  # so the call leaves the environment alone
    with pytest.raises(ValueError, match="label"):
        ensure_softhsm_token(SOFTHSM_MODULE, "x" * 33, PIN, SO_PIN, conf)


_INTERRUPTED_SCRIPT = """
import sys
from pathlib import Path
import pkcs11
from keymanager.hsm.softhsm import ensure_softhsm_token

module, label, pin, so_pin, conf = sys.argv[1:6]
try:
    ensure_softhsm_token(module, label, "12", so_pin, Path(conf))  # too short: C_InitPIN refuses
except RuntimeError as exc:
    print("refused:", exc)
print("repaired:", ensure_softhsm_token(module, label, pin, so_pin, Path(conf)))
with pkcs11.lib(module).get_token(token_label=label).open(user_pin=pin):
    print("login: True")
"""


def test_a_token_without_user_pin_gets_one(conf: Path) -> None:
    assert _python(_INTERRUPTED_SCRIPT, conf, env_conf=conf).splitlines() == [
        "refused: initialising the user PIN failed: PinLenRange",
        "repaired: True",
        "login: True",
    ]
