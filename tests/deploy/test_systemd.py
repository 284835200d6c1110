"""Static checks of the systemd units in deploy/systemd."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.support import SECRET_NAME, SYSTEMD, systemd_unit, unit_environment, unit_values

UNITS = ["keymanager.service", "keymanager-init.service"]

HARDENING = {
    "User": "keymanager",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ReadWritePaths": "/var/lib/keymanager",
    "PrivateTmp": "yes",
    "ProtectHome": "yes",
    "EnvironmentFile": "/etc/keymanager/env",
    "CapabilityBoundingSet": "",
    "RestrictSUIDSGID": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "SystemCallArchitectures": "native",
}


@pytest.mark.parametrize("name", UNITS)
def test_hardening(name: str) -> None:
    unit = systemd_unit(SYSTEMD / name)
    for key, value in HARDENING.items():
        assert unit_values(unit, "Service", key) == [value], f"{name}: {key}={value}"
    assert "@system-service" in unit_values(unit, "Service", "SystemCallFilter")


@pytest.mark.parametrize("name", UNITS)
def test_pin_through_load_credential(name: str) -> None:
    unit = systemd_unit(SYSTEMD / name)
    credentials = dict(v.split(":", 1) for v in unit_values(unit, "Service", "LoadCredential"))
    assert credentials["pin"].startswith("/etc/keymanager/credentials/")
    env = unit_environment(unit)
    assert env["KM_PKCS11_PIN_FILE"] == "%d/pin"
    assert env["KM_VAR_DIR"] == "/var/lib/keymanager"
    for key, value in env.items():
        if SECRET_NAME.search(key):
            assert key.endswith("_FILE") and value.startswith("%d/"), f"{name}: {key}={value}"


def test_service_restarts_and_serves() -> None:
    unit = systemd_unit(SYSTEMD / "keymanager.service")
    assert unit_values(unit, "Service", "Restart") == ["on-failure"]
    assert unit_values(unit, "Service", "ExecStart") == ["/opt/keymanager/bin/keymanager serve"]
    assert unit_values(unit, "Install", "WantedBy") == ["multi-user.target"]


def test_init_unit_is_one_shot() -> None:
    unit = systemd_unit(SYSTEMD / "keymanager-init.service")
    assert unit_values(unit, "Service", "Type") == ["oneshot"]
    assert unit_values(unit, "Service", "ExecStart") == ["/opt/keymanager/bin/keymanager init"]


def test_env_example_holds_no_secret() -> None:
    text = (SYSTEMD / "env.example").read_text()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        assert not SECRET_NAME.search(key) or key.endswith(("_FILE", "_LABEL")), line
        if key == "KM_DATABASE_URL":
            userinfo = value.split("://", 1)[1].split("@", 1)[0]
            assert ":" not in userinfo, "no password in the database URL"


def test_units_exist() -> None:
    assert sorted(p.name for p in Path(SYSTEMD).glob("*.service")) == sorted(UNITS)


def _example() -> dict[str, str]:
    lines = [line.strip() for line in (SYSTEMD / "env.example").read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_every_door_has_its_port() -> None:
    """HTTPS on KM_PORT (REST, the AWS KMS API, XKS by path) and KMIP on KM_KMIP_PORT, whose client
    certificates need KM_TLS_CLIENT_CA (no development CA on a production host)."""
    env = _example()
    assert (env["KM_PORT"], env["KM_KMIP_PORT"]) == ("8443", "5696")
    assert env["KM_TLS_CLIENT_CA"].startswith("/etc/keymanager/tls/")
    assert "/kms/xks/v1" in (SYSTEMD / "env.example").read_text()
    unit = systemd_unit(SYSTEMD / "keymanager.service")
    assert "AF_INET" in unit_values(unit, "Service", "RestrictAddressFamilies")[0]
