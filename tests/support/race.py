"""Work run in child processes by the race tests (kept free of the test fixtures' imports,
so a spawned child keeps the parent's SOFTHSM2_CONF)."""

from __future__ import annotations

import time
import traceback
from datetime import datetime
from multiprocessing.synchronize import Barrier
from typing import Any

from keymanager.config import Settings
from keymanager.errors import HsmUnavailable
from keymanager.services.container import Services

PINGS = 3
"""Pings a racer makes before it meets the other: SoftHSM's file store answered one of them
GeneralError once in CI (two new processes opening the token directory at the same moment, the
test process holding it too); the race under test starts after the barrier, not here."""


def race(kind: str, settings: dict[str, Any], moment: datetime, barrier: Barrier, results: Any) -> None:
    """Build this process's services, wait for the other racer, then sweep or rotate due keys.

    On any failure the barrier is broken, so the other racer stops waiting at once.
    """
    try:
        _race(kind, settings, moment, barrier, results)
    except BaseException:
        barrier.abort()
        results.put(traceback.format_exc())
        raise


def _race(kind: str, settings: dict[str, Any], moment: datetime, barrier: Barrier, results: Any) -> None:
    services = Services.build(Settings(**settings), run_migrations=False)
    try:
        ready(services)
        barrier.wait(timeout=60)
        done = services.lifecycle.sweep(moment) if kind == "sweep" else services.lifecycle.rotate_due(moment)
        results.put(done)
    finally:
        services.close()


def ready(services: Services) -> None:
    """Ping the HSM until it answers (at most :data:`PINGS` times, 0.2 s apart); its error after that."""
    for attempt in range(PINGS):
        try:
            services.hsm.ping()
            return
        except HsmUnavailable:
            if attempt == PINGS - 1:
                raise
            time.sleep(0.2)
