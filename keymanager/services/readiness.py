"""Readiness: whether this process can serve, told from what its last operations did.

A part (the HSM, the database) is ready when it answers a cheap check now and its last real
operation did not fail. A ping alone is not enough: a token that cannot take writes (full
disk, read-only directory) still answers reads, and a database answers ``SELECT 1`` on a
full disk. So after a failed HSM call (or one past its deadline), or a failed audit write, the part
stays unready until an operation succeeds again — a request's, or readiness's own probe, which
repeats what failed (a token object made and destroyed; one audit record written), at most
once per ``probe_interval`` per process so that an unauthenticated caller cannot make it costly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from keymanager.db import Store
from keymanager.errors import KeyManagerError
from keymanager.hsm import Hsm
from keymanager.services.audit import AuditWriter
from keymanager.worker import LastOutcome


class Readiness:
    """Checks the HSM and the database (with the audit writer) the way the module docstring says."""

    def __init__(self, hsm: Hsm, store: Store, writer: AuditWriter, *, probe_interval: float, timeout: float) -> None:
        self._hsm = hsm
        self._store = store
        self._writer = writer
        self._hsm_probe = _Probe(probe_interval)
        self._audit_probe = _Probe(probe_interval)
        self._timeout = timeout

    def check(self) -> dict[str, bool]:
        """``{"hsm": ready?, "database": ready?}``; blocks at most about two HSM/audit deadlines."""
        return {"hsm": self._hsm_ready(), "database": self._database_ready()}

    def hsm_capabilities(self) -> dict[str, Any] | None:
        """What the HSM token can and cannot do (``Capabilities.summary``), as this process read it when
        its session opened; None before that. Makes no call to the HSM."""
        known = self._hsm.known_capabilities()
        return None if known is None else known.summary()

    def hsm_stuck_for(self) -> float:
        """Seconds the HSM's running call is past its deadline (0.0 when none is)."""
        return self._hsm.stuck_for()

    def _hsm_ready(self) -> bool:
        if self._hsm.stuck_for() > 0:
            return False
        if self._hsm.outcome.failing:
            return self._hsm_probe.run(self._hsm.outcome, self._hsm.probe)
        return _answers(self._hsm.ping)

    def _database_ready(self) -> bool:
        if self._writer.stuck_for() > 0 or not _answers(self._store.ping):
            return False
        if self._writer.outcome.failing:
            return self._audit_probe.run(self._writer.outcome, lambda: self._writer.probe(self._timeout))
        return True


class _Probe:
    """One probe at a time and at most one per ``interval``; a probe that cannot run now counts as failed."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._last = float("-inf")

    def run(self, outcome: LastOutcome, probe: Callable[[], None]) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        try:
            now = time.monotonic()
            if now - self._last < self._interval:
                return not outcome.failing  # a request may have succeeded since the last probe
            self._last = now
            return _answers(probe)
        finally:
            self._lock.release()


def _answers(check: Callable[[], None]) -> bool:
    try:
        check()
    except KeyManagerError:
        return False
    return True
