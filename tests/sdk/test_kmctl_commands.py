"""kmctl's newer commands and output against the real service: ``--query`` / ``--output``, data
keys, re-encryption, MACs, key import, ``whoami``; exit codes decided before any request; empty
lists; errors that name what they are about; the profile ``keymanager init`` writes.

In-process, as ``tests/sdk/test_kmctl.py`` (whose ``kmctl`` helper this uses).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
from pathlib import Path

import pytest
from keymanager_sdk.cli import main
from keymanager_sdk.cli._parser import parser

from keymanager.cli.profile import write_kmctl_profile
from keymanager.config import Settings
from tests.e2e.conftest import Server
from tests.sdk.conftest import App, unique
from tests.sdk.test_kmctl import environment, kmctl, ok_json


def out(server: Server, *args: str, token: str | None = None, stdin: bytes = b"") -> str:
    done = kmctl(server, *args, token=token, stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_query_and_text_output_give_one_value_for_scripts(server: Server) -> None:
    name = unique("cli-p")
    token = out(server, "principals", "create", name, "--role", "app", "--query", "token", "--output", "text").strip()
    assert len(token.splitlines()) == 1 and len(token) > 40
    me = json.loads(out(server, "whoami", "-o", "json", token=token))
    assert (me["name"], me["role"], me["cert_subject"]) == (name, "app", None)
    assert out(server, "whoami", "--query", "role", "--output", "text", token=token) == "app\n"
    names = out(server, "principals", "list", "--query", "[].name", "--output", "text").split("\t")
    assert name in [n.strip() for n in names]
    rows = [line.split() for line in out(server, "whoami", token=token).splitlines()]
    assert ["name", name] in rows and ["role", "app"] in rows and ["cert_subject", "-"] in rows
    bad = kmctl(server, "keys", "list", "--query", "[?")
    assert bad.returncode == 2 and b"--query" in bad.stderr


def test_datakey_reencrypt_and_mac(server: Server, app_principal: App) -> None:
    me = app_principal.name
    first, second, index = unique("cli-k"), unique("cli-k"), unique("cli-mac")
    policy = json.dumps({"encrypt": [me], "decrypt": [me], "generate_data_key": [me], "reencrypt": [me]})
    for name in (first, second):
        ok_json(server, "keys", "create", name, "--policy", policy)
    ok_json(server, "keys", "create", index, "--algorithm", "HMAC_SHA256", "--policy", json.dumps({"mac": [me]}))
    token = app_principal.token

    made = json.loads(out(server, "datakey", first, "--output", "json", "--context", "c=1", token=token))
    assert len(base64.b64decode(made["plaintext"])) == 32
    opened = kmctl(server, "decrypt", "--context", "c=1", token=token, stdin=made["ciphertext"].encode())
    assert opened.stdout == base64.b64decode(made["plaintext"])
    wrapped = json.loads(out(server, "datakey", first, "--wrapped-only", "--bits", "128", "-o", "json", token=token))
    assert "plaintext" not in wrapped or wrapped["plaintext"] is None

    sealed = out(server, "encrypt", first, token=token, stdin=b"4111111111111111")
    moved = out(server, "reencrypt", "--to", second, token=token, stdin=sealed.encode())
    assert moved != sealed and kmctl(server, "decrypt", "--key", second, token=token, stdin=moved.encode()).stdout == (
        b"4111111111111111"
    )

    tag = out(server, "mac", index, token=token, stdin=b"4111111111111111").strip()
    assert len(bytes.fromhex(tag)) == 32
    good = kmctl(server, "mac-verify", index, tag, token=token, stdin=b"4111111111111111")
    bad = kmctl(server, "mac-verify", index, tag, token=token, stdin=b"4111111111111112")
    assert (good.returncode, good.stdout, bad.returncode, bad.stdout) == (0, b"valid\n", 1, b"invalid\n")
    assert kmctl(server, "mac-verify", index, "not-hex", token=token).returncode == 2


def test_keys_import_wraps_locally_in_one_command(server: Server, tmp_path: Path) -> None:
    name = unique("cli-byok")
    created = ok_json(server, "keys", "create", name, "--origin", "external", "--algorithm", "AES_256_GCM")
    assert created["state"] == "pending_import"
    material = tmp_path / "key.bin"
    material.write_bytes(os.urandom(32))
    imported = ok_json(server, "keys", "import", name, "--material", str(material))
    assert (imported["state"], imported["primary_version"]) == ("enabled", 1)
    missing = kmctl(server, "keys", "import", name, "--material", str(tmp_path / "none.bin"))
    assert missing.returncode == 2 and str(tmp_path / "none.bin") in missing.stderr.decode()


def test_exit_2_is_decided_before_any_request(server: Server, tmp_path: Path) -> None:
    nothing_listens = "https://127.0.0.1:9"  # a request would exit 3
    no_token = kmctl(server, "keys", "list", env={"KM_URL": nothing_listens, "KM_TOKEN": ""})
    assert no_token.returncode == 2 and no_token.stderr.decode().startswith("kmctl: no credential: set KM_TOKEN")
    plain = kmctl(server, "keys", "list", env={"KM_URL": "http://127.0.0.1:9"})
    assert plain.returncode == 2 and b"http:// is refused" in plain.stderr
    as_json = json.loads(kmctl(server, "keys", "list", "-o", "json", env={"KM_TOKEN": ""}).stderr)
    assert (as_json["error"]["code"], as_json["exit_code"]) == ("usage", 2)


def test_an_empty_list_prints_a_note_on_stderr_only(server: Server) -> None:
    nobody = unique("nobody")
    empty = kmctl(server, "audit", "list", "--principal", nobody)
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, b"", b"kmctl: no audit records\n")
    as_json = kmctl(server, "audit", "list", "--principal", nobody, "--output", "json")
    assert (as_json.stdout, as_json.stderr) == (b"[]\n", b"kmctl: no audit records\n")


def test_errors_name_the_key_or_principal(server: Server) -> None:
    key, principal = unique("none"), unique("none")
    missing = kmctl(server, "keys", "show", key)
    assert missing.returncode == 1 and f"[key '{key}']" in missing.stderr.decode()
    gone = kmctl(server, "principals", "delete", principal)
    assert gone.returncode == 1 and f"[principal '{principal}']" in gone.stderr.decode()


def _actions(node: argparse.ArgumentParser, path: str = "kmctl") -> list[tuple[str, argparse.Action]]:
    found = []
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _actions(child, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            found.append((path, action))
    return found


def test_every_argument_has_help_and_defaults_are_shown(server: Server) -> None:
    undocumented = [(path, a.dest) for path, a in _actions(parser()) if not a.help]
    assert undocumented == []
    shown = " ".join(kmctl(server, "keys", "delete", "--help").stdout.decode().split())
    assert "days before the HSM objects are destroyed (default: 30)" in shown
    shown = " ".join(kmctl(server, "audit", "list", "--help").stdout.decode().split())
    assert "(default: desc)" in shown and "(default: 100)" in shown


def test_the_profile_init_writes_is_used_in_the_checkout(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (server.var_dir / "kmctl.toml").is_file()  # written by the fixture's keymanager init
    checkout = tmp_path / "checkout"
    port = int(server.url.rsplit(":", 1)[1])
    settings = Settings(var_dir=checkout / "var", port=port)
    settings.var_dir.mkdir(parents=True)
    profile = write_kmctl_profile(settings, server.var_dir / "admin.token", server.ca)
    assert profile == checkout / "var" / "kmctl.toml" and "token_file" in profile.read_text()
    for variable in [v for v in environment(server) if v.startswith(("KM_", "KMCTL_"))]:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(checkout)
    assert main(["keys", "list", "--output", "json"]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["keys", "list"]) == 2  # elsewhere: no URL
