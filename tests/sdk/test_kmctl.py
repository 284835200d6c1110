"""``kmctl`` against the real service: every command, JSON and tables, exit codes.

The commands run in this process (``keymanager_sdk.cli.main`` with its own environment, standard
input and captured standard output and error: what a shell gives the installed script); the
installed ``kmctl`` entry point itself runs as a real process in :func:`test_version` and in the
concurrent policy edits.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from keymanager_sdk import KeyManager
from keymanager_sdk.cli import main

from tests.e2e.conftest import Server
from tests.sdk.conftest import App, unique

KMCTL = Path(sys.executable).parent / "kmctl"
"""The installed entry point (``make test`` installs the SDK and kmctl into the venv)."""


@dataclass(frozen=True)
class Ran:
    """One kmctl command's exit code and output, as a process would have given them."""

    returncode: int
    stdout: bytes
    stderr: bytes


def environment(server: Server, token: str | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment less any KM_/KMCTL_ setting, pointing kmctl at ``server`` (admin unless ``token``)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KM_", "KMCTL_"))}
    base.update(KM_URL=server.url, KM_TOKEN=token or server.admin_token, KM_CA=str(server.ca))
    base["KMCTL_CONFIG"] = "/nonexistent/kmctl.toml"
    return base | (env or {})


def _text(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", write_through=True)


def kmctl(
    server: Server, *args: str, token: str | None = None, stdin: bytes = b"", env: dict[str, str] | None = None
) -> Ran:
    """Run one kmctl command in this process with KM_URL / KM_TOKEN / KM_CA pointing at ``server``
    (admin unless ``token``), ``stdin`` as its input; its exit code (argparse's ``SystemExit`` too)."""
    streams = {"stdin": _text(stdin), "stdout": _text(), "stderr": _text()}
    with mock.patch.dict(os.environ, environment(server, token, env), clear=True), mock.patch.multiple(sys, **streams):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
    out, err = (streams[name].buffer for name in ("stdout", "stderr"))
    return Ran(code, out.getvalue(), err.getvalue())  # type: ignore[attr-defined]


def ok_json(server: Server, *args: str, token: str | None = None) -> Any:
    done = kmctl(server, *args, "--json", token=token)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_keys_commands(server: Server, app_principal: App) -> None:
    name = unique("cli-k")
    policy = json.dumps({"encrypt": [app_principal.name], "decrypt": [app_principal.name]})
    created = ok_json(server, "keys", "create", name, "--algorithm", "AES_256_GCM", "--policy", policy)
    assert (created["name"], created["state"], created["policy"]["encrypt"]) == (name, "enabled", [app_principal.name])
    table = kmctl(server, "keys", "list")
    assert table.returncode == 0 and table.stdout.decode().startswith("NAME") and name in table.stdout.decode()
    assert ok_json(server, "keys", "show", name)["id"] == created["id"]
    assert ok_json(server, "keys", "update", name, "--description", "cli")["description"] == "cli"
    assert ok_json(server, "keys", "rotate", name)["primary_version"] == 2
    assert ok_json(server, "keys", "disable", name)["state"] == "disabled"
    assert ok_json(server, "keys", "enable", name)["state"] == "enabled"
    assert ok_json(server, "keys", "delete", name, "--pending-days", "30")["state"] == "pending_deletion"
    assert ok_json(server, "keys", "cancel-deletion", name)["state"] == "disabled"
    shown = kmctl(server, "keys", "show", name)
    assert shown.returncode == 0 and b"state" in shown.stdout and b"disabled" in shown.stdout


def test_principals_commands(server: Server) -> None:
    name = unique("cli-p")
    created = ok_json(server, "principals", "create", name, "--role", "auditor")
    assert created["name"] == name and len(created["token"]) > 20
    assert name in {p["name"] for p in ok_json(server, "principals", "list")}
    assert name in kmctl(server, "principals", "list").stdout.decode()
    assert kmctl(server, "principals", "delete", name).returncode == 0
    assert name not in {p["name"] for p in ok_json(server, "principals", "list")}


def test_encrypt_decrypt_small_fields(server: Server, app_principal: App, tmp_path: Path) -> None:
    name = unique("cli-k")
    ok_json(
        server,
        "keys",
        "create",
        name,
        "--policy",
        json.dumps({"encrypt": [app_principal.name], "decrypt": [app_principal.name]}),
    )
    token = app_principal.token
    sealed = kmctl(server, "encrypt", name, "--context", "tenant=42", token=token, stdin=b"4111111111111111")
    assert sealed.returncode == 0 and sealed.stdout.startswith(b"km:1:"), sealed.stderr
    opened = kmctl(server, "decrypt", "--context", "tenant=42", token=token, stdin=sealed.stdout)
    assert (opened.returncode, opened.stdout) == (0, b"4111111111111111")
    (tmp_path / "ct").write_bytes(sealed.stdout)
    kmctl(
        server,
        "decrypt",
        "--in",
        str(tmp_path / "ct"),
        "--out",
        str(tmp_path / "pt"),
        "--context",
        "tenant=42",
        token=token,
    )
    assert (tmp_path / "pt").read_bytes() == b"4111111111111111"
    refused = kmctl(server, "decrypt", "--context", "tenant=43", token=token, stdin=sealed.stdout)
    assert refused.returncode == 1 and refused.stdout == b""
    assert b"decryption_failed: decryption failed" in refused.stderr


def test_envelope_files_and_pipes(server: Server, app_principal: App, tmp_path: Path) -> None:
    name = unique("cli-k")
    grant = [app_principal.name]
    ok_json(server, "keys", "create", name, "--policy", json.dumps({"generate_data_key": grant, "decrypt": grant}))
    blob = os.urandom(1_000_003)
    (tmp_path / "blob").write_bytes(blob)
    token = app_principal.token
    done = kmctl(
        server,
        "encrypt",
        name,
        "--envelope",
        "--in",
        str(tmp_path / "blob"),
        "--out",
        str(tmp_path / "blob.kmev"),
        token=token,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "blob.kmev").read_bytes()[:4] == b"KMEV"
    done = kmctl(
        server,
        "decrypt",
        "--envelope",
        "--in",
        str(tmp_path / "blob.kmev"),
        "--out",
        str(tmp_path / "back"),
        token=token,
    )
    assert done.returncode == 0 and (tmp_path / "back").read_bytes() == blob
    piped = kmctl(server, "encrypt", name, "--envelope", "--segment-size", "64", token=token, stdin=blob)
    back = kmctl(server, "decrypt", "--envelope", token=token, stdin=piped.stdout)
    assert back.returncode == 0 and back.stdout == blob
    broken = kmctl(server, "decrypt", "--envelope", token=token, stdin=piped.stdout[:-1])
    assert broken.returncode == 1 and b"decryption_failed" in broken.stderr


def test_audit_commands(server: Server) -> None:
    records = ok_json(server, "audit", "list", "--limit", "5")
    assert 0 < len(records) <= 5 and {"seq", "action", "hash"} <= set(records[0])
    assert kmctl(server, "audit", "list", "--limit", "3").stdout.decode().startswith("SEQ")
    verified = ok_json(server, "audit", "verify")
    assert verified["ok"] is True
    assert kmctl(server, "audit", "verify").returncode == 0


def test_errors_and_exit_codes(server: Server, app_principal: App) -> None:
    missing = kmctl(server, "keys", "show", unique("none"))
    assert missing.returncode == 1 and missing.stderr.decode().startswith("kmctl: key_not_found:")
    forbidden = kmctl(server, "principals", "list", token=app_principal.token)
    assert forbidden.returncode == 1 and b"forbidden" in forbidden.stderr
    unauthenticated = kmctl(server, "keys", "list", token="not-a-token")
    assert unauthenticated.returncode == 1 and b"unauthenticated" in unauthenticated.stderr
    unreachable = kmctl(server, "keys", "list", env={"KM_URL": "https://127.0.0.1:9"})
    assert unreachable.returncode == 3 and b"cannot reach" in unreachable.stderr
    assert kmctl(server, "keys", "list", env={"KM_URL": ""}).returncode == 2
    assert kmctl(server, "keys", "frobnicate").returncode == 2


def test_profile_file(server: Server, tmp_path: Path) -> None:
    token_file = tmp_path / "admin.token"
    token_file.write_text(server.admin_token + "\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[prod]\nurl = "{server.url}"\nca = "{server.ca}"\ntoken_file = "{token_file}"\n')
    env = {"KM_URL": "", "KM_TOKEN": "", "KM_CA": ""}
    listed = kmctl(server, "--config", str(config), "--profile", "prod", "keys", "list", "--json", env=env)
    assert listed.returncode == 0 and isinstance(json.loads(listed.stdout), list)
    other = kmctl(server, "keys", "list", "--config", str(config), "--profile", "staging", env=env)
    assert other.returncode == 2 and b"no profile [staging]" in other.stderr


@pytest.mark.parametrize("args", [["--help"], ["keys", "--help"], ["encrypt", "--help"]])
def test_help(server: Server, args: list[str]) -> None:
    assert kmctl(server, *args).returncode == 0


def test_version_and_a_command_through_the_installed_entry_point(server: Server) -> None:
    from keymanager_sdk import __version__

    assert KMCTL.exists(), f"{KMCTL}: the SDK's kmctl is not installed (make setup-test)"
    done = subprocess.run([str(KMCTL), "--version"], capture_output=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.decode().strip()) == (0, f"kmctl {__version__} (keymanager-sdk)")
    assert kmctl(server, "--version") == Ran(0, done.stdout, b"")
    listed = subprocess.run(
        [str(KMCTL), "keys", "list", "--json"], env=environment(server), capture_output=True, timeout=60, check=False
    )
    assert listed.returncode == 0, listed.stderr.decode()
    assert isinstance(json.loads(listed.stdout), list)


def _complete(line: str) -> list[str]:
    """What the installed kmctl answers a shell's completion hook for ``line`` (argcomplete's protocol)."""
    with tempfile.NamedTemporaryFile() as answer:
        env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line))}
        env |= {"_ARGCOMPLETE_STDOUT_FILENAME": answer.name, "_ARGCOMPLETE_IFS": "\n", "_ARGCOMPLETE_SHELL": "bash"}
        done = subprocess.run([str(KMCTL)], env=env, capture_output=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr.decode()
        return Path(answer.name).read_text().split()


def test_completion_completes_commands_and_options_from_the_parser() -> None:
    assert _complete("kmctl ke") == ["keys"]
    assert _complete("kmctl keys cr") == ["create"]
    assert "--order" in _complete("kmctl --json audit list --or")
    assert {"bash", "zsh", "fish"} <= set(_complete("kmctl completion "))


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_hook_the_shell_to_kmctl(server: Server, shell: str) -> None:
    done = kmctl(server, "completion", shell)
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "_ARGCOMPLETE" in text and "kmctl" in text
    if shell == "bash":
        checked = subprocess.run(["bash", "-n"], input=done.stdout, capture_output=True, timeout=60, check=False)
        assert checked.returncode == 0, checked.stderr.decode()


def test_usage_errors_exit_2_with_one_line(server: Server, tmp_path: Path) -> None:
    cases = [
        (["keys", "create", unique("k"), "--policy", "{not json"], "--policy is not valid JSON"),
        (["keys", "create", unique("k"), "--policy", "[1]"], "--policy must be a JSON object"),
        (["keys", "create", unique("k"), "--policy", f"@{tmp_path / 'none.json'}"], "none.json"),
        (["encrypt", "k", "--context", "novalue"], "--context takes NAME=VALUE"),
        (["encrypt", "k", "--in", str(tmp_path / "missing")], "missing"),
        (["keys", "frobnicate"], "invalid choice: 'frobnicate'"),
    ]
    for args, text in cases:
        done = kmctl(server, *args)
        lines = done.stderr.decode().splitlines()
        assert (done.returncode, len(lines)) == (2, 1), (args, done.stderr)
        assert lines[0].startswith("kmctl: ") and text in lines[0], (args, lines)
        assert done.stdout == b""
    missing_token = kmctl(server, "keys", "list", env={"KM_TOKEN": "", "KM_TOKEN_FILE": str(tmp_path / "tok")})
    assert missing_token.returncode == 2
    assert missing_token.stderr.decode() == f"kmctl: token file {tmp_path / 'tok'}: No such file or directory\n"
    missing_ca = kmctl(server, "keys", "list", env={"KM_CA": str(tmp_path / "ca.pem")})
    assert missing_ca.returncode == 2 and str(tmp_path / "ca.pem") in missing_ca.stderr.decode()
    no_scheme = kmctl(server, "keys", "list", env={"KM_URL": "127.0.0.1:8443"})
    assert no_scheme.returncode == 2 and b"invalid service URL" in no_scheme.stderr


def test_token_file_from_the_environment(server: Server, tmp_path: Path) -> None:
    (tmp_path / "tok").write_text(server.admin_token + "\n")
    done = kmctl(server, "keys", "list", "--json", env={"KM_TOKEN": "", "KM_TOKEN_FILE": str(tmp_path / "tok")})
    assert done.returncode == 0 and isinstance(json.loads(done.stdout), list)


def test_json_applies_to_errors(server: Server) -> None:
    missing = kmctl(server, "keys", "show", unique("none"), "--json")
    body = json.loads(missing.stderr)
    assert missing.returncode == 1 and missing.stdout == b""
    assert body["error"]["code"] == "key_not_found" and body["request_id"] and body["exit_code"] == 1
    usage = json.loads(kmctl(server, "keys", "create", "x", "--policy", "{", "--json").stderr)
    assert (usage["error"]["code"], usage["exit_code"]) == ("usage", 2)
    unreachable = kmctl(server, "--json", "keys", "list", env={"KM_URL": "https://127.0.0.1:9"})
    body = json.loads(unreachable.stderr)
    assert unreachable.returncode == 3 and body["error"]["code"] == "unreachable"
    assert body["error"]["message"].startswith("GET https://127.0.0.1:9/v1/keys: ")


def test_a_large_input_without_envelope_gets_a_hint(server: Server, app_principal: App) -> None:
    name = unique("cli-k")
    ok_json(server, "keys", "create", name, "--policy", json.dumps({"encrypt": [app_principal.name]}))
    token = app_principal.token
    huge = kmctl(server, "encrypt", name, token=token, stdin=os.urandom(2_000_000))
    assert huge.returncode == 2 and huge.stdout == b""
    assert b"--envelope" in huge.stderr and b"--stream" in huge.stderr
    over_the_field_limit = kmctl(server, "encrypt", name, token=token, stdin=os.urandom(100_000))
    assert over_the_field_limit.returncode == 1 and b"payload_too_large" in over_the_field_limit.stderr
    assert b"--envelope" in over_the_field_limit.stderr


def test_onboard_stream_with_a_progress_bar(server: Server, app_principal: App, tmp_path: Path) -> None:
    name = unique("cli-k")
    grant = [app_principal.name]
    ok_json(server, "keys", "create", name, "--policy", json.dumps({"encrypt": grant, "decrypt": grant}))
    blob = os.urandom(3_000_000)
    (tmp_path / "blob").write_bytes(blob)
    token = app_principal.token
    sealed = kmctl(
        server, "encrypt", name, "--stream", "--progress", "--in", str(tmp_path / "blob"), "--out",
        str(tmp_path / "blob.km"), token=token,
    )  # fmt: skip
    assert sealed.returncode == 0, sealed.stderr
    assert b"encrypting" in sealed.stderr and b"3.0/3.0 MB" in sealed.stderr  # the bar, finished
    opened = kmctl(server, "decrypt", "--stream", "--key", name, "--in", str(tmp_path / "blob.km"), token=token)
    assert opened.returncode == 0 and opened.stdout == blob and opened.stderr == b""  # no bar: not a terminal
    no_key = kmctl(server, "decrypt", "--stream", "--in", str(tmp_path / "blob.km"), token=token)
    assert no_key.returncode == 2 and b"--key" in no_key.stderr


def test_audit_list_newest_first_by_default_with_key_names(server: Server) -> None:
    name = unique("cli-k")
    created = ok_json(server, "keys", "create", name)
    ok_json(server, "keys", "rotate", name)
    newest = ok_json(server, "audit", "list", "--limit", "3")
    assert [r["position"] for r in newest] == sorted((r["position"] for r in newest), reverse=True)
    oldest = ok_json(server, "audit", "list", "--order", "asc", "--limit", "1")[0]["position"]
    assert newest[0]["position"] > oldest
    mine = ok_json(server, "audit", "list", "--key", name)
    assert [r["action"] for r in mine[:2]] == ["key.rotate", "key.create"]
    assert {r["key_name"] for r in mine} == {name} and {r["key_id"] for r in mine} == {created["id"]}
    shown = kmctl(server, "audit", "list", "--key", name).stdout.decode().splitlines()
    assert shown[0].split()[4] == "KEY" and name in shown[1] and created["id"] not in shown[1]


# --- keys policy add|remove: read-modify-write with If-Match ---------------------------------------


def test_policy_add_and_remove_change_one_grant(server: Server, admin: KeyManager) -> None:
    key, first, second = unique("cli-pol"), unique("cli-a"), unique("cli-b")
    for name in (first, second):
        ok_json(server, "principals", "create", name, "--role", "app")
    ok_json(server, "keys", "create", key, "--policy", json.dumps({"decrypt": [first]}))

    added = ok_json(server, "keys", "policy", "add", key, "decrypt", second)
    assert added["policy"]["decrypt"] == sorted([first, second])
    again = ok_json(server, "keys", "policy", "add", key, "decrypt", second)
    assert again["policy"]["decrypt"] == sorted([first, second])
    removed = ok_json(server, "keys", "policy", "remove", key, "decrypt", first)
    assert removed["policy"]["decrypt"] == [second]
    assert admin.get_key(key).policy.decrypt == (second,)


def test_policy_add_of_an_unknown_principal_or_operation_fails_cleanly(server: Server) -> None:
    key = unique("cli-pol")
    ok_json(server, "keys", "create", key)

    ghost = kmctl(server, "keys", "policy", "add", key, "encrypt", unique("ghost"))
    assert ghost.returncode == 1 and b"invalid_request" in ghost.stderr and b"ghost-" in ghost.stderr
    usage = kmctl(server, "keys", "policy", "add", key, "launch", "anyone")
    assert usage.returncode == 2 and usage.stderr.count(b"\n") == 1, usage.stderr


def test_policy_add_after_a_concurrent_edit_retries_and_keeps_both_changes(server: Server, admin: KeyManager) -> None:
    key, principal = unique("cli-pol"), unique("cli-a")
    ok_json(server, "principals", "create", principal, "--role", "app")
    ok_json(server, "keys", "create", key)
    original, edits = KeyManager.get_key, []

    def get_key_then_edit(self: KeyManager, key: str) -> Any:
        found = original(self, key)
        if not edits:  # right after kmctl's first read, another admin changes the key
            edits.append(self.update_key(key, description="changed by someone else"))
        return found

    with mock.patch.object(KeyManager, "get_key", get_key_then_edit):
        done = kmctl(server, "keys", "policy", "add", key, "encrypt", principal, "--json")

    assert done.returncode == 0, done.stderr.decode()
    assert b"changed meanwhile; reading it again (attempt 2 of 5)" in done.stderr
    final = admin.get_key(key)
    assert final.description == "changed by someone else"
    assert final.policy.encrypt == (principal,)
    assert json.loads(done.stdout)["etag"] == final.etag


def test_concurrent_policy_adds_lose_nothing(server: Server, admin: KeyManager) -> None:
    key = unique("cli-pol")
    names = [unique("cli-c") for _ in range(4)]
    for name in names:
        ok_json(server, "principals", "create", name, "--role", "app")
    ok_json(server, "keys", "create", key)
    command = [str(KMCTL), "keys", "policy", "add", key, "mac"]  # the installed entry point, four processes at once
    running = [subprocess.Popen([*command, name], env=environment(server), stderr=subprocess.PIPE) for name in names]
    for process in running:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr.decode()

    assert admin.get_key(key).policy.mac == tuple(sorted(names))
