"""The service's own names (``KM_PUBLIC_HOSTS``, else the certificate's names and the listen address)."""

from __future__ import annotations

from pathlib import Path

from keymanager.cli.tls import ensure_dev_pki
from keymanager.services.public_hosts import public_hosts
from tests.conftest import make_settings


def test_default_the_certificates_names_and_the_listen_address_with_the_port(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "var", host="10.0.0.5", port=8443)
    ensure_dev_pki(settings.tls_dir)
    assert public_hosts(settings) == {"localhost:8443", "127.0.0.1:8443", "[::1]:8443", "10.0.0.5:8443"}


def test_on_port_443_the_names_are_bare(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "var", port=443)
    ensure_dev_pki(settings.tls_dir)
    assert public_hosts(settings) == {"localhost", "127.0.0.1", "[::1]"}


def test_without_a_certificate_only_the_listen_address(tmp_path: Path) -> None:
    assert public_hosts(make_settings(tmp_path / "var")) == {"127.0.0.1:8443"}


def test_the_setting_is_the_whole_list(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "var", public_hosts=["KMS.example.com", "kms.example.com:443", "lb:8443"])
    ensure_dev_pki(settings.tls_dir)
    assert public_hosts(settings) == {"kms.example.com", "lb:8443"}
