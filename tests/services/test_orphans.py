"""The orphan sweep: km/ token objects no key version names are destroyed after a grace period,
once across processes, audited; referenced objects and objects being created are never touched.

Real SoftHSM (a token of its own, so other tests' objects are not this sweep's business),
SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from keymanager.config import SOFTHSM_MODULE, Settings
from keymanager.domain.audit import AuditQuery
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm, KeyUsage, KeyVersion
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.hsm.softhsm import ensure_softhsm_token
from keymanager.services.container import Services
from keymanager.services.key_creation import NewKey
from tests.conftest import SOFTHSM_CONF, TEST_PIN, TEST_SO_PIN
from tests.support.orphan_child import sweep_together
from tests.support.postgres import create_database, drop_database

TOKEN = "km-orphans"
GRACE = 3600.0


@pytest.fixture(scope="module")
def orphan_token(softhsm_token: str, hsm: Hsm) -> Iterator[str]:
    ensure_softhsm_token(SOFTHSM_MODULE, TOKEN, TEST_PIN, TEST_SO_PIN, SOFTHSM_CONF)
    yield TOKEN
    # The sweeps here re-initialise the library (a fresh view of the token), which ends every
    # session of this process: the run's shared adapter opens its session anew for the next tests.
    hsm.find_labels_afresh("km/")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated database (a copy of the process's template) on either backend."""
    if request.param == "sqlite":
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), tmp_path / "orphans.db")
        yield f"sqlite:///{tmp_path / 'orphans.db'}"
        return
    url = create_database(template=request.getfixturevalue("postgres_template"))
    yield url
    drop_database(url)


@pytest.fixture
def settings_kwargs(database_url: str, tmp_path: Path, orphan_token: str) -> dict[str, object]:
    return {
        "var_dir": tmp_path / "var",
        "database_url": database_url,
        "pkcs11_token_label": orphan_token,
        "pkcs11_pin": TEST_PIN,
        "pkcs11_so_pin": TEST_SO_PIN,
        "softhsm2_conf": SOFTHSM_CONF,
        "orphan_grace_seconds": GRACE,
    }


@pytest.fixture
def services(settings_kwargs: dict[str, object]) -> Iterator[Services]:
    built = Services.build(Settings(**settings_kwargs))  # type: ignore[arg-type]
    for label in built.hsm.find_labels_afresh("km/"):  # an empty token for each test
        built.hsm.destroy_label(label)
    AuditKey(built.hsm, built.settings.audit_key_label).ensure(create=True)  # the sweep's records are sealed
    yield built
    built.close()


def orphan_records(services: Services) -> list[tuple[str | None, str, str | None, int]]:
    records = services.audit_records.query(AuditQuery(action="hsm.orphan_destroy", limit=1000))
    return [(r.entry.principal, r.entry.details["label"], r.entry.key_id, r.entry.status) for r in records]


def labels(hsm: Hsm, *versions: KeyVersion) -> set[str]:
    return {label for v in versions for label in (v.hsm.enc_label, v.hsm.mac_label) if label}


def test_orphans_past_the_grace_period_are_destroyed_and_referenced_objects_never(services: Services) -> None:
    hsm, lifecycle = services.hsm, services.lifecycle
    cbc = services.keys.create(NewKey("cbc"))
    gcm = services.lifecycle.rotate(services.keys.create(NewKey("gcm", algorithm=Algorithm.AES_256_GCM)))
    referenced = labels(hsm, *cbc.versions.values(), *gcm.versions.values())
    ghost = new_id()
    crashed_rotation = hsm.generate_version(cbc.id, 2, cbc.algorithm)  # HSM create, then the crash
    crashed_creation = hsm.generate_version(ghost, 1, Algorithm.AES_256_GCM)
    not_a_version = hsm.generate_version("audit", 1, Algorithm.HMAC_SHA256)  # km/ but no key version's label
    orphans = {crashed_rotation.enc_label, crashed_rotation.mac_label, crashed_creation.enc_label}
    start = datetime.now(UTC)

    assert lifecycle.sweep_orphans(start) == []  # first seen now: too young
    assert lifecycle.sweep_orphans(start + timedelta(seconds=GRACE - 1)) == []
    assert set(hsm.find_labels_afresh("km/")) == referenced | orphans | {not_a_version.mac_label}

    destroyed = lifecycle.sweep_orphans(start + timedelta(seconds=GRACE))

    assert set(destroyed) == orphans and len(destroyed) == 3
    assert set(hsm.find_labels_afresh("km/")) == referenced | {not_a_version.mac_label}
    assert sorted(orphan_records(services)) == sorted(
        ("system", label, ghost if ghost in label else cbc.id, 200) for label in orphans
    )
    assert services.audit_records.verify().ok
    assert lifecycle.sweep_orphans(start + timedelta(seconds=3 * GRACE)) == []
    assert len(orphan_records(services)) == 3
    for key in (cbc, gcm):  # the referenced keys still work
        for version in key.versions.values():
            head = b"km:1:" + key.id.encode()
            body = hsm.encrypt(version.hsm, key.algorithm, head, b"4111111111111111", b"")
            assert asyncio.run(hsm.adecrypt(version.hsm, key.algorithm, head, body, b"")) == b"4111111111111111"


def test_an_object_committed_within_the_grace_period_is_kept(services: Services) -> None:
    key = services.keys.create(NewKey("slow"))
    in_flight = services.hsm.generate_version(key.id, 2, key.algorithm)  # created, not committed yet
    start = datetime.now(UTC)
    assert services.lifecycle.sweep_orphans(start) == []  # seen unreferenced: noted, not touched
    version = KeyVersion(key_id=key.id, version=2, hsm=in_flight, created_at=start)
    services.store.add_key_version(key.id, version, expected_primary=1)  # the commit comes

    assert services.lifecycle.sweep_orphans(start + timedelta(seconds=2 * GRACE)) == []

    assert labels(services.hsm, version) <= set(services.hsm.find_labels_afresh("km/"))
    assert orphan_records(services) == []


@pytest.mark.usefixtures("services")  # an empty token
def test_the_maintenance_round_sweeps_when_due(settings_kwargs: dict[str, object]) -> None:
    built = Services.build(Settings(**{**settings_kwargs, "orphan_grace_seconds": 0}))  # type: ignore[arg-type]
    try:
        orphan = built.hsm.generate_version(new_id(), 1, Algorithm.AES_256_GCM)
        built.maintain()
        assert orphan.enc_label not in built.hsm.find_labels_afresh("km/")
        assert [label for _, label, _, _ in orphan_records(built)] == [orphan.enc_label]
    finally:
        built.close()


def test_two_processes_sweeping_at_once_record_each_orphan_once(
    services: Services, settings_kwargs: dict[str, object]
) -> None:
    made = [services.hsm.generate_version(new_id(), 1, Algorithm.AES_256_CBC_HMAC_SHA256) for _ in range(4)]
    orphans = labels(services.hsm, *(KeyVersion("", 1, objects, datetime.now(UTC)) for objects in made))
    start = datetime.now(UTC)
    assert services.lifecycle.sweep_orphans(start) == []  # noted by this process

    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    moment = start + timedelta(seconds=GRACE)
    racers = [context.Process(target=sweep_together, args=(settings_kwargs, moment, barrier, results)) for _ in "ab"]
    for racer in racers:
        racer.start()
    outcomes = [results.get(timeout=120) for _ in racers]
    for racer in racers:
        racer.join(timeout=60)
    assert [r.exitcode for r in racers] == [0, 0], outcomes

    first, second = (set(o) for o in outcomes)
    assert first | second == orphans and not first & second
    assert sorted(label for _, label, _, _ in orphan_records(services)) == sorted(orphans)
    assert services.hsm.find_labels_afresh("km/") == []
    assert services.audit_records.verify().ok


@pytest.mark.usefixtures("services")  # an empty token
def test_no_sweep_when_turned_off(settings_kwargs: dict[str, object]) -> None:
    built = Services.build(
        Settings(**{**settings_kwargs, "orphan_grace_seconds": 0, "orphan_sweep": False})  # type: ignore[arg-type]
    )
    try:
        foreign = built.hsm.generate_version(new_id(), 1, Algorithm.AES_256_GCM)  # another installation's key
        built.maintain()
        assert foreign.enc_label in built.hsm.find_labels_afresh("km/")
        assert orphan_records(built) == []
    finally:
        built.close()


def test_private_and_public_key_objects_are_swept_like_secret_keys(services: Services) -> None:
    hsm, lifecycle = services.hsm, services.lifecycle
    kept = services.keys.create(NewKey("signing", algorithm=Algorithm.ECC_NIST_P256))
    referenced = set(kept.versions[1].hsm.labels())
    crashed, _ = hsm.generate_key_pair(new_id(), 1, Algorithm.ECC_NIST_P256, KeyUsage.SIGN_VERIFY)
    orphans = set(crashed.labels())
    assert len(orphans) == 2 and len(referenced) == 2
    start = datetime.now(UTC)
    assert lifecycle.sweep_orphans(start) == []
    assert set(hsm.find_labels_afresh("km/")) == referenced | orphans

    assert set(lifecycle.sweep_orphans(start + timedelta(seconds=GRACE))) == orphans

    assert set(hsm.find_labels_afresh("km/")) == referenced
    assert services.audit_records.verify().ok
