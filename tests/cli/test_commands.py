"""``keymanager --version``, ``dev-cert``, the database URL forms, and ``init`` checking the
database before it creates anything in the HSM."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from cryptography import x509

from keymanager import __version__
from keymanager.cli.startup import database_problem
from keymanager.cli.tls import ensure_dev_pki
from keymanager.config import Settings
from tests.cli.test_configuration import keymanager
from tests.support.postgres import create_database, drop_database


def test_version() -> None:
    run = keymanager("--version")
    assert (run.returncode, run.stdout.strip()) == (0, f"keymanager {__version__}")


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("postgres://u:p@db:5432/km", "postgresql+psycopg://u:p@db:5432/km"),
        ("postgresql://u@db/km?sslmode=require", "postgresql+psycopg://u@db/km?sslmode=require"),
        ("postgresql+psycopg://u@db/km", "postgresql+psycopg://u@db/km"),
        ("sqlite:////srv/km.db", "sqlite:////srv/km.db"),
    ],
)
def test_the_usual_postgres_url_forms_mean_psycopg(given: str, meant: str) -> None:
    assert Settings(database_url=given).resolved_database_url() == meant


def test_a_postgres_scheme_url_opens_and_migrates_a_real_database(tmp_path: Path) -> None:
    url = create_database()
    try:
        plain = "postgres://" + url.split("://", 1)[1]
        assert database_problem(Settings(var_dir=tmp_path, database_url=plain)) is None
    finally:
        drop_database(url)


def test_init_checks_the_database_before_it_creates_the_token(tmp_path: Path) -> None:
    missing = f"postgres://postgres@127.0.0.1:5432/km_test_{secrets.token_hex(8)}"  # no such database
    var_dir = tmp_path / "var"
    run = keymanager("init", KM_VAR_DIR=str(var_dir), KM_DATABASE_URL=missing)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "keymanager init: database postgresql+psycopg://***@127.0.0.1:5432/km_test_" in run.stderr
    assert "does not exist" in run.stderr and "Traceback" not in run.stderr
    assert not (var_dir / "softhsm").exists() and not (var_dir / "tls").exists()


def test_dev_cert_issues_a_client_certificate_from_the_development_ca(tmp_path: Path) -> None:
    var_dir = tmp_path / "var"
    before = keymanager("dev-cert", "newcomer", KM_VAR_DIR=str(var_dir))
    assert before.returncode == 2 and "run 'keymanager init'" in before.stderr
    pki = ensure_dev_pki(var_dir / "tls")
    made = keymanager("dev-cert", "newcomer", KM_VAR_DIR=str(var_dir))
    assert made.returncode == 0, made.stderr
    cert = x509.load_pem_x509_certificate((var_dir / "tls" / "client-newcomer.pem").read_bytes())
    assert cert.subject.rfc4514_string() == "CN=newcomer,O=keymanager"
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()))
    assert 'kmctl principals create newcomer --role app --cert-subject "CN=newcomer,O=keymanager"' in made.stdout
    bad = keymanager("dev-cert", "-bad name", KM_VAR_DIR=str(var_dir))
    assert bad.returncode == 2 and "'-bad name'" in bad.stderr
