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
door's attacks of ``tests/security``), with the settings :data:`DOOR_SETTINGS`. Both come from
``server_pool`` (``tests/support/server_pool.py``): one server per distinct settings in a test
process, so a fixture asking it for settings another already asked for gets that server.

Under ``make test`` the tests run on pytest-xdist workers (one per core). Each worker imports this
module, so each has its own SoftHSM token directory (chosen below), var dirs, ports and PostgreSQL
databases. The tests sharing a server (or anything else a session- or module-scoped fixture made
with ``server_pool`` or ``tmp_path_factory``) are kept on one worker: :func:`pytest_collection_modifyitems`
gives them one ``xdist_group`` (``--dist loadgroup``), so the server starts once in the run.

A test that must own a server (it injects faults, restarts the server, or reads its log or
counters alone) starts it with ``running_server(...)`` inside the test and says so with
``@pytest.mark.own_server``. Tests marked ``interop`` (other people's suites and clients, the
browser) run in ``make test-interop``, the others in ``make test``.

Migrated databases: :func:`migrated_sqlite` is one SQLite file migrated once per test process;
``settings`` and ``services`` start from a copy of it instead of running every migration again.
:func:`postgres_template` is its PostgreSQL counterpart (``CREATE DATABASE … TEMPLATE …``).
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
from keymanager.db import make_engine, migrate
from keymanager.domain.models import Role
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.hsm.softhsm import ensure_softhsm_token, write_softhsm_conf
from keymanager.services.container import Services

if TYPE_CHECKING:
    from tests.e2e.conftest import Server
    from tests.support.server_pool import ServerPool


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


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database at the newest schema revision, made once per test process: copy it, never open it."""
    path = tmp_path_factory.mktemp("migrated") / "keymanager.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        migrate(engine)
    finally:
        engine.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A PostgreSQL database at the newest schema revision, made once per test process, to copy
    (``create_database(template=postgres_template)``), never to open; dropped at the end."""
    from tests.support.postgres import create_database, drop_database

    url = create_database()
    engine = make_engine(url)
    try:
        migrate(engine)
    finally:
        engine.dispose()
    yield url
    drop_database(url)


@pytest.fixture
def settings(tmp_path: Path, migrated_sqlite: Path) -> Settings:
    """Settings of a test's own service: a private var dir whose SQLite database is a copy of
    :func:`migrated_sqlite` (already migrated; ``Services.build`` finds nothing to do)."""
    var_dir = tmp_path / "var"
    var_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copyfile(migrated_sqlite, var_dir / "keymanager.db")
    return make_settings(var_dir)


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
def server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    """This test process's servers, one per distinct settings (``tests/support/server_pool.py``)."""
    from tests.support.server_pool import ServerPool  # it imports this module: not at import time

    pool = ServerPool(tmp_path_factory)
    try:
        yield pool
    finally:
        pool.close()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns the groups into node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests sharing a server (a shared root: ``tests/support/server_pool.py``) get one ``xdist_group``."""
    from tests.support.server_pool import mark_groups

    mark_groups(items)


@pytest.fixture(scope="session")
def server(server_pool: ServerPool) -> Server:
    """One real two-worker server over TLS (client certificates from the dev CA) for the session."""
    return server_pool.get()


DOOR_SETTINGS = {
    # The refusal tests fail authentication many times from 127.0.0.1: a burst they never spend (the
    # throttle itself is tested in tests/kms_api/test_throttle.py on a server of its own).
    "KM_AUTH_FAILURE_BURST": "10000",
    "KM_MIN_PENDING_DAYS": "0",
    "KM_MAINTENANCE_INTERVAL_SECONDS": "1",  # keys pending deletion for 0 days are destroyed within a second
}
"""The settings of ``kms_server``, on top of ``running_server``'s."""


@pytest.fixture(scope="session")
def kms_server(server_pool: ServerPool) -> Server:
    """One real two-worker server for the AWS KMS API's and the XKS proxy's tests (:data:`DOOR_SETTINGS`)."""
    return server_pool.get(**DOOR_SETTINGS)
