"""Scheduled work run by two processes at once acts once (SQLite and PostgreSQL, one SoftHSM token)."""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import wait
from pathlib import Path

import pytest

from keymanager.config import Settings
from keymanager.domain.audit import AuditQuery
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from keymanager.services.key_creation import NewKey
from tests.conftest import SOFTHSM_CONF, TEST_PIN, TEST_SO_PIN, TEST_TOKEN_LABEL
from tests.support.postgres import create_database, drop_database
from tests.support.race import race

RACE_DEADLINE_SECONDS = 120


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated database (a copy of the process's template) on either backend."""
    if request.param == "sqlite":
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), tmp_path / "race.db")
        yield f"sqlite:///{tmp_path / 'race.db'}"
        return
    url = create_database(template=request.getfixturevalue("postgres_template"))
    yield url
    drop_database(url)


@pytest.fixture
def settings_kwargs(database_url: str, tmp_path: Path) -> dict[str, object]:
    return {
        "var_dir": tmp_path / "var",
        "database_url": database_url,
        "pkcs11_token_label": TEST_TOKEN_LABEL,
        "pkcs11_pin": TEST_PIN,
        "pkcs11_so_pin": TEST_SO_PIN,
        "softhsm2_conf": SOFTHSM_CONF,
    }


@pytest.fixture
def racing_services(settings_kwargs: dict[str, object], hsm: Hsm) -> Iterator[Services]:
    built = Services.build(Settings(**settings_kwargs), hsm=hsm)  # type: ignore[arg-type]
    yield built
    built.close()


def run_race(kind: str, settings_kwargs: dict[str, object], moment: datetime) -> list[list[str]]:
    """What each of two processes, released together by a barrier, did. A racer that dies
    breaks the barrier (``abort()``), so its partner fails at once instead of waiting it out."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    racers = [context.Process(target=race, args=(kind, settings_kwargs, moment, barrier, results)) for _ in "ab"]
    for process in racers:
        process.start()
    try:
        running = {process.sentinel: process for process in racers}
        deadline = time.monotonic() + RACE_DEADLINE_SECONDS
        while running:
            ended = wait(list(running), timeout=max(0.0, deadline - time.monotonic()))
            assert ended, f"racers still running after {RACE_DEADLINE_SECONDS} s"
            for sentinel in ended:
                process = running.pop(sentinel)
                process.join()
                if process.exitcode != 0:
                    barrier.abort()  # a partner still waiting gets BrokenBarrierError now
        outcomes = []
        with contextlib.suppress(queue.Empty):  # a racer killed by a signal reported nothing
            while len(outcomes) < len(racers):
                outcomes.append(results.get(timeout=30))  # a loaded machine delivers late
    finally:
        for process in racers:
            if process.is_alive():
                process.kill()
                process.join()
    assert [p.exitcode for p in racers] == [0, 0], f"exit codes {[p.exitcode for p in racers]}: {outcomes}"
    return outcomes


def actions(services: Services, action: str) -> list[str | None]:
    return [r.entry.key_id for r in services.audit_records.query(AuditQuery(action=action, limit=1000))]


def test_two_sweepers_at_once_destroy_a_key_once(racing_services: Services, settings_kwargs: dict[str, object]) -> None:
    key = racing_services.keys.create(NewKey("doomed"))
    racing_services.lifecycle.schedule_deletion(key, 7)
    assert len(racing_services.hsm.find_labels(f"km/{key.id}/")) == 2

    outcomes = run_race("sweep", settings_kwargs, datetime.now(UTC) + timedelta(days=8))

    assert sorted(outcomes, key=len) == [[], [key.id]]
    assert racing_services.hsm.find_labels(f"km/{key.id}/") == []
    assert racing_services.keys.find("doomed").state.value == "destroyed"
    assert actions(racing_services, "key.destroy") == [key.id]
    assert racing_services.audit_records.verify().ok
    assert racing_services.lifecycle.sweep(datetime.now(UTC) + timedelta(days=9)) == []


def test_scheduled_rotation_happens_once_when_two_processes_race(
    racing_services: Services, settings_kwargs: dict[str, object]
) -> None:
    key = racing_services.keys.create(NewKey("rotating", rotation_period_days=1))

    outcomes = run_race("rotate", settings_kwargs, datetime.now(UTC) + timedelta(days=2))

    assert sorted(outcomes, key=len) == [[], [key.id]]
    rotated = racing_services.keys.find("rotating")
    assert rotated.primary_version == 2
    assert sorted(rotated.versions) == [1, 2]
    # Both racers generated objects; the loser destroyed its own: exactly two versions' worth remain.
    labels = racing_services.hsm.find_labels(f"km/{key.id}/")
    assert len(labels) == 4
    assert {label.split("/")[2].split(".")[0] for label in labels} == {"v1", "v2"}
    assert actions(racing_services, "key.rotate") == [key.id]
    assert not rotated.rotation_due(datetime.now(UTC) + timedelta(hours=12))
