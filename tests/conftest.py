"""Shared fixtures: one HSM token for the test run, settings, services, an app client.

The token is SoftHSM's unless the environment names another PKCS#11 module (``make test-hsm``):
``KM_TEST_PKCS11_MODULE`` (the library), ``KM_TEST_PKCS11_TOKEN_LABEL`` (an initialised token
whose objects the tests may create and destroy) and ``KM_TEST_PKCS11_PIN`` or
``KM_TEST_PKCS11_PIN_FILE`` (its user PIN; 4-8 characters are fine).

SoftHSM reads SOFTHSM2_CONF once per process, when the library is initialised, so the
token directory of the run is chosen here, at import, before any test touches PKCS#11.

``server`` is the session's one real two-worker ``keymanager serve`` over TLS (``tests/e2e/conftest.py``
says how it runs), shared by ``tests/e2e``, ``tests/sdk`` and ``tests/security``: one start-up for the
three. ``kms_server`` is the one of the AWS doors' tests (``tests/kms_api``, ``tests/xks``, and the KMS
door's attacks of ``tests/security``), with the settings :data:`DOOR_SETTINGS`. A test that needs
settings of its own starts a server of its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.config import SOFTHSM_MODULE, Settings, is_softhsm_module
from keymanager.domain.models import Role
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.hsm.softhsm import ensure_softhsm_token, write_softhsm_conf
from keymanager.services.container import Services

if TYPE_CHECKING:
    from tests.e2e.conftest import Server


def _test_pin() -> str:
    pin_file = os.environ.get("KM_TEST_PKCS11_PIN_FILE")
    if pin_file:
        return Path(pin_file).read_text().strip()
    return os.environ.get("KM_TEST_PKCS11_PIN") or "test-user-pin-73519"


TEST_PKCS11_MODULE = os.environ.get("KM_TEST_PKCS11_MODULE") or SOFTHSM_MODULE
"""The PKCS#11 module the tests run against (SoftHSM unless ``KM_TEST_PKCS11_MODULE`` says)."""
ON_SOFTHSM = is_softhsm_module(TEST_PKCS11_MODULE)
TEST_PIN = _test_pin()
TEST_SO_PIN = "test-so-pin-88213"
TEST_TOKEN_LABEL = os.environ.get("KM_TEST_PKCS11_TOKEN_LABEL") or "km-test"

_HSM_DIR = Path(tempfile.mkdtemp(prefix="km-test-hsm-"))
SOFTHSM_CONF = _HSM_DIR / "softhsm2.conf"
os.environ["SOFTHSM2_CONF"] = str(SOFTHSM_CONF)
write_softhsm_conf(SOFTHSM_CONF, _HSM_DIR / "tokens")


@pytest.fixture(scope="session")
def softhsm_token() -> Iterator[str]:
    """The label of this run's token: SoftHSM's, created once and removed at the end; another
    module's must exist and take the PIN (else the run fails at once, naming the problem)."""
    if not ON_SOFTHSM:
        from keymanager.hsm.probe import probe

        problem = probe(TEST_PKCS11_MODULE, TEST_TOKEN_LABEL, TEST_PIN)
        if problem is not None:
            pytest.fail(f"KM_TEST_PKCS11_MODULE: {problem}")
        yield TEST_TOKEN_LABEL
        return
    if not Path(SOFTHSM_MODULE).exists():
        pytest.fail(f"SoftHSM is required for the tests: {SOFTHSM_MODULE} missing (apt-get install softhsm2)")
    ensure_softhsm_token(SOFTHSM_MODULE, TEST_TOKEN_LABEL, TEST_PIN, TEST_SO_PIN, SOFTHSM_CONF)
    yield TEST_TOKEN_LABEL
    shutil.rmtree(_HSM_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def hsm(softhsm_token: str) -> Iterator[Hsm]:
    """The run's HSM adapter (one logged-in session for the whole test process)."""
    adapter = Hsm(TEST_PKCS11_MODULE, softhsm_token, TEST_PIN)
    AuditKey(adapter).ensure(create=True)  # as `keymanager init` does; every test database shares it
    yield adapter
    adapter.close()


def make_settings(var_dir: Path, database_url: str | None = None, **overrides: object) -> Settings:
    """Settings for a test: the run's SoftHSM token, a private var dir, SQLite unless told."""
    return Settings(
        var_dir=var_dir,
        database_url=database_url,
        pkcs11_module=TEST_PKCS11_MODULE,
        pkcs11_token_label=TEST_TOKEN_LABEL,
        pkcs11_pin=TEST_PIN,
        pkcs11_so_pin=TEST_SO_PIN,
        softhsm2_conf=SOFTHSM_CONF,
        **overrides,
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "var")


@pytest.fixture
def services(settings: Settings, hsm: Hsm) -> Iterator[Services]:
    built = Services.build(settings, hsm=hsm)
    yield built
    built.close()


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services=services), base_url="https://testserver") as test_client:
        yield test_client


@pytest.fixture
def admin_token(services: Services) -> str:
    return services.principals.create("admin", Role.ADMIN).token


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real two-worker server over TLS (client certificates from the dev CA) for the session."""
    from tests.e2e.conftest import running_server  # it imports this module: not at import time

    with running_server(tmp_path_factory.mktemp("e2e")) as started:
        yield started


DOOR_SETTINGS = {
    # The refusal tests fail authentication many times from 127.0.0.1: a burst they never spend (the
    # throttle itself is tested in tests/kms_api/test_throttle.py on a server of its own).
    "KM_AUTH_FAILURE_BURST": "10000",
    "KM_MIN_PENDING_DAYS": "0",
    "KM_MAINTENANCE_INTERVAL_SECONDS": "1",  # keys pending deletion for 0 days are destroyed within a second
}
"""The settings of ``kms_server``, on top of ``running_server``'s."""


@pytest.fixture(scope="session")
def kms_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real two-worker server for the AWS KMS API's and the XKS proxy's tests (:data:`DOOR_SETTINGS`)."""
    from tests.e2e.conftest import running_server

    with running_server(tmp_path_factory.mktemp("doors"), **DOOR_SETTINGS) as started:
        yield started
