"""Static checks of deploy/docker-compose.yml, deploy/haproxy.cfg and the secrets generator."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.support import COMPOSE, DEPLOY, HAPROXY_CFG, SECRET_NAME, load_yaml

KEYMANAGER_IMAGE = re.compile(r"^\$\{KEYMANAGER_IMAGE:-keymanager:[\w.-]+\}$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = load_yaml(COMPOSE)
    assert isinstance(document, dict)
    return document


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services = compose["services"]
    assert isinstance(services, dict)
    return services


def _keymanager_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in _services(compose).items() if KEYMANAGER_IMAGE.match(str(s.get("image", "")))}


def _argv(service: dict[str, Any]) -> list[str]:
    """What runs: the service's entrypoint (default: the image's ``keymanager``) and command."""
    entrypoint = service.get("entrypoint", ["keymanager"])
    command = service.get("command", ["serve"])
    assert isinstance(entrypoint, list) and isinstance(command, list), "use the exec (list) form"
    return [str(a) for a in entrypoint + command]


def _subcommand(service: dict[str, Any]) -> str:
    argv = _argv(service)
    if argv[0] == "keymanager":
        return argv[1]
    # /bin/sh -c 'script ... exec keymanager "$@"' $0 args...
    assert argv[:2] == ["/bin/sh", "-c"] and 'exec keymanager "$$@"' in argv[2], argv
    return argv[4]


def _replicas(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in _keymanager_services(compose).items() if _subcommand(s) == "serve"}


def test_two_replicas_of_the_same_image_serving(compose: dict[str, Any]) -> None:
    replicas = _replicas(compose)
    assert len(replicas) >= 2, f"two keymanager replicas expected, found {sorted(replicas)}"
    assert len({s["image"] for s in replicas.values()}) == 1


def test_init_runs_once_and_replicas_wait_for_it(compose: dict[str, Any]) -> None:
    services = _keymanager_services(compose)
    inits = [n for n, s in services.items() if _subcommand(s) == "init"]
    assert inits == ["init"]
    assert services["init"].get("restart", "no") == "no"
    assert services["init"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name, replica in _replicas(compose).items():
        assert replica["depends_on"]["init"]["condition"] == "service_completed_successfully", name


def test_shared_state_volume(compose: dict[str, Any]) -> None:
    services = _keymanager_services(compose)
    mounts = {
        name: {v.split(":")[0] for v in service["volumes"] if v.endswith(":/var/lib/keymanager")}
        for name, service in services.items()
    }
    shared = set.intersection(*mounts.values())
    assert shared, f"init and replicas must share the SoftHSM token volume: {mounts}"
    assert shared <= set(compose["volumes"]), "a named volume"


def test_postgres_16_with_volume_and_healthcheck(compose: dict[str, Any]) -> None:
    postgres = _services(compose)["postgres"]
    assert re.fullmatch(r"postgres:16[\w.-]*", postgres["image"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert postgres["environment"]["POSTGRES_PASSWORD_FILE"].startswith("/run/secrets/")
    for name, service in _keymanager_services(compose).items():
        url = service["environment"]["KM_DATABASE_URL"]
        assert url.startswith("postgresql+psycopg://"), name
        userinfo = url.split("://", 1)[1].split("@", 1)[0]
        assert ":" not in userinfo, f"{name}: no password in KM_DATABASE_URL"


def test_images_pinned_by_tag(compose: dict[str, Any]) -> None:
    for name, service in _services(compose).items():
        image = str(service["image"])
        if KEYMANAGER_IMAGE.match(image):
            continue
        assert ":" in image and not image.endswith(":latest"), f"{name}: {image} is not pinned"


def test_pins_come_from_compose_secrets(compose: dict[str, Any]) -> None:
    declared = compose["secrets"]
    for name, source in declared.items():
        assert set(source) == {"file"}, f"secret {name}: from a file"
        assert source["file"].startswith("./secrets/")
    for name, service in _keymanager_services(compose).items():
        env = service["environment"]
        pin_file = env["KM_PKCS11_PIN_FILE"]
        secret = pin_file.removeprefix("/run/secrets/")
        assert pin_file.startswith("/run/secrets/") and secret in service["secrets"], name
        assert secret in declared


def test_no_literal_secrets(compose: dict[str, Any]) -> None:
    for name, service in _services(compose).items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(key):
                assert key.endswith("_FILE"), f"{name}: {key} must name a file, not hold the secret"
                assert str(value).startswith("/run/secrets/"), f"{name}: {key}={value!r}"
    text = COMPOSE.read_text()
    assert "km-dev-pin" not in text and "km-dev-so-pin" not in text
    assert not re.search(r"(?i)(pin|password)\s*[:=]\s*['\"]?[\w-]{4,}['\"]?\s*$", _uncommented(text), re.MULTILINE)


def _uncommented(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def test_load_balancer_passes_tls_through_to_both_replicas(compose: dict[str, Any]) -> None:
    haproxy = _services(compose)["haproxy"]
    assert any(v.startswith("./haproxy.cfg:") for v in haproxy["volumes"])
    assert any(str(p).endswith(":8443") for p in haproxy["ports"])
    config = HAPROXY_CFG.read_text()
    assert re.search(r"^\s*mode tcp\s*$", config, re.MULTILINE), "TLS passthrough"
    assert not re.search(r"\bbind\b.*\bssl\b", config), "HAProxy must not terminate TLS"
    assert re.search(r"http-check send meth GET uri /v1/ready\b", config)
    https = _section(config, "backend keymanager_replicas")
    assert re.search(r"default-server\b.*\bsend-proxy-v2\b.*\bcheck\b.*\bcheck-ssl\b.*\bcheck-send-proxy\b", https)
    servers = re.findall(r"^\s*server\s+\S+\s+(\S+):(\d+)$", https, re.MULTILINE)
    assert {host for host, _ in servers} == set(_replicas(compose))
    assert {port for _, port in servers} == {"8443"}


def _section(config: str, name: str) -> str:
    """The lines of HAProxy section ``name`` (``backend x``), up to the next section, without comments."""
    found = re.search(rf"(?ms)^{re.escape(name)}\n(.*?)(?=^\S|\Z)", config)
    assert found, name
    return "\n".join(line for line in found.group(1).splitlines() if not line.lstrip().startswith("#"))


def test_every_door_has_its_port(compose: dict[str, Any]) -> None:
    """HTTPS (REST, the AWS KMS API, XKS by path) and KMIP, published by HAProxy and passed through to
    each replica's KMIP listener with the PROXY v2 header (every listener reads it), checked on the
    HTTPS port."""
    replicas = _replicas(compose)
    for name, replica in replicas.items():
        assert replica["environment"]["KM_KMIP_PORT"] == "5696", name
    haproxy = _services(compose)["haproxy"]
    assert {str(p).rpartition(":")[2] for p in haproxy["ports"]} == {"8443", "5696"}
    config = HAPROXY_CFG.read_text()
    front = _section(config, "frontend keymanager_kmip")
    assert re.search(r"^\s*bind :5696$", front, re.MULTILINE)
    assert "default_backend keymanager_kmip_replicas" in front
    kmip = _section(config, "backend keymanager_kmip_replicas")
    assert re.search(r"default-server\b.*\bsend-proxy-v2\b.*\bcheck\b.*\bcheck-ssl\b.*\bcheck-send-proxy\b", kmip)
    servers = re.findall(r"^\s*server\s+\S+\s+(\S+):(\d+) port (\d+)$", kmip, re.MULTILINE)
    assert {host for host, _, _ in servers} == set(replicas)
    assert {(port, check) for _, port, check in servers} == {("5696", "8443")}
    assert "/kms/xks/v1" in COMPOSE.read_text() and "/kms/xks/v1" in config  # XKS's path, on HTTPS


def test_secrets_generator(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    shutil.copy(DEPLOY / "secrets" / "generate.sh", secrets / "generate.sh")
    script = secrets / "generate.sh"
    subprocess.run(["sh", str(script)], check=True, capture_output=True, timeout=30)
    values = {}
    for name in ("pkcs11_pin", "pkcs11_so_pin", "postgres_password", "pgpass"):
        path = secrets / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o400, name
        values[name] = path.read_text().strip()
        if os.geteuid() == 0 and name != "postgres_password":
            assert path.stat().st_uid == 10001, name
    assert re.fullmatch(r"[0-9a-f]{48}", values["pkcs11_pin"])
    assert values["pkcs11_pin"] != values["pkcs11_so_pin"]
    assert values["pgpass"] == f"postgres:5432:keymanager:keymanager:{values['postgres_password']}"
    before = {name: (secrets / name).read_text() for name in values}
    subprocess.run(["sh", str(script)], check=True, capture_output=True, timeout=30)
    assert {name: (secrets / name).read_text() for name in values} == before, "rerunning keeps existing secrets"


def test_secret_files_are_ignored_by_git() -> None:
    ignore = (DEPLOY / "secrets" / ".gitignore").read_text().split()
    assert ignore[0] == "*" or "*" in ignore
    assert "!generate.sh" in ignore
