"""Work run in child processes by the race tests (kept free of the test fixtures' imports,
so a spawned child keeps the parent's SOFTHSM2_CONF)."""

from __future__ import annotations

import traceback
from datetime import datetime
from multiprocessing.synchronize import Barrier
from typing import Any

from keymanager.config import Settings
from keymanager.services.container import Services


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
        services.hsm.ping()
        barrier.wait(timeout=60)
        done = services.lifecycle.sweep(moment) if kind == "sweep" else services.lifecycle.rotate_due(moment)
        results.put(done)
    finally:
        services.close()
