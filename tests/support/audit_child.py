"""Work run in a child process by the audit multi-process tests (free of the fixtures' imports)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from keymanager.config import SOFTHSM_MODULE
from keymanager.db import make_engine
from keymanager.db.audit import AuditStore
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.services.audit import AuditLog


def append_records(url: str, softhsm_conf: str, token: str, pin: str, worker: int, count: int) -> None:
    """Append ``count`` records through an audit writer of this process, sealed with the run's audit key."""
    os.environ["SOFTHSM2_CONF"] = softhsm_conf  # before the library is first initialised here
    engine = make_engine(url)
    hsm = Hsm(SOFTHSM_MODULE, token, pin)
    log = AuditLog(AuditStore(engine, AuditKey(hsm)))
    futures = [log.submit(_entry(worker * 10_000 + n, f"w{worker}")) for n in range(count)]
    for future in futures:
        future.result(timeout=60)
    log.close()
    hsm.close()
    engine.dispose()


def _entry(n: int, principal: str) -> AuditEntry:
    return AuditEntry(
        time=datetime.now(UTC),
        action="key.encrypt",
        outcome=Outcome.OK,
        status=200,
        request_id=f"req-{n}",
        principal=principal,
        details={"n": n},
    )
