"""Work run in child processes by the orphan sweep tests (free of the fixtures' imports, so a
spawned child keeps the parent's SOFTHSM2_CONF)."""

from __future__ import annotations

import traceback
from datetime import datetime
from multiprocessing.synchronize import Barrier
from typing import Any

from keymanager.config import Settings
from keymanager.services.container import Services


def sweep_together(settings: dict[str, Any], moment: datetime, barrier: Barrier, results: Any) -> None:
    """Build this process's services, wait for the other sweeper, sweep orphans as of ``moment``;
    report the labels this process recorded destroyed (or the traceback)."""
    try:
        services = Services.build(Settings(**settings), run_migrations=False)
        try:
            services.hsm.ping()
            barrier.wait(timeout=60)
            results.put(services.lifecycle.sweep_orphans(moment))
        finally:
            services.close()
    except BaseException:
        barrier.abort()  # the other sweeper stops waiting at once
        results.put(traceback.format_exc())
        raise
