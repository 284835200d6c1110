"""Work run in a child process by the audit multi-process tests (free of the fixtures' imports)."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime
from typing import Any

from keymanager.config import SOFTHSM_MODULE
from keymanager.db import make_engine
from keymanager.db.audit import AuditRecords
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.errors import HsmUnavailable
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.services.audit import AuditWriter
from keymanager.services.audit_chain import AuditChain


def append_records(url: str, softhsm_conf: str, token: str, pin: str, worker: int, count: int) -> None:
    """Append ``count`` records through an audit writer of this process, sealed with the run's audit key."""
    os.environ["SOFTHSM2_CONF"] = softhsm_conf  # before the library is first initialised here
    engine = make_engine(url)
    hsm = Hsm(SOFTHSM_MODULE, token, pin)
    log = AuditWriter(AuditRecords(engine, AuditKey(hsm)))

    async def write_all() -> None:
        entries = [_entry(worker * 10_000 + n, f"w{worker}") for n in range(count)]
        await asyncio.wait_for(asyncio.gather(*(log.awrite(e) for e in entries)), timeout=60)

    asyncio.run(write_all())
    log.close()
    hsm.close()
    engine.dispose()


def prepare_chain(url: str, softhsm_conf: str, token: str, pin: str, label: str, barrier: Any, results: Any) -> None:
    """``AuditChain.prepare`` with the audit key ``label``, once every party reached ``barrier``;
    reports the key's presence (found or created) on ``results``."""
    os.environ["SOFTHSM2_CONF"] = softhsm_conf
    engine = make_engine(url)
    hsm = _opened(token, pin)  # the session is open before the race
    key = AuditKey(hsm, label)
    barrier.wait(timeout=60)
    try:
        results.put(AuditChain(AuditRecords(engine, key), key).prepare().value)
    finally:
        hsm.close()
        engine.dispose()


def _opened(token: str, pin: str, tries: int = 5) -> Hsm:
    """An ``Hsm`` of ``token`` whose session is open. SoftHSM can miss the token when it initialises
    while another process writes the token directory (``NoSuchToken``, seen once in a CI rehearsal);
    the race under test starts after the session, so a miss is tried again with the library
    finalised and initialised afresh (``restart_pending``, as after a failed call), a few times."""
    hsm = Hsm(SOFTHSM_MODULE, token, pin)
    for attempt in range(tries):
        try:
            hsm.ping()
            return hsm
        except HsmUnavailable:
            if attempt == tries - 1:
                raise
            hsm._token.restart_pending = True
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def count_labels(softhsm_conf: str, token: str, pin: str, label: str, results: Any) -> None:
    """Report how many secret keys labelled ``label`` the token holds (a fresh process sees them all)."""
    os.environ["SOFTHSM2_CONF"] = softhsm_conf
    hsm = Hsm(SOFTHSM_MODULE, token, pin)
    try:
        results.put(hsm.find_labels(label).count(label))
    finally:
        hsm.close()


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


def append_and_checkpoint(appends: int) -> None:
    """With the settings of the environment: ``appends`` appends of two records each (each sealed),
    then one checkpoint (to the log, and to ``KM_AUDIT_CHECKPOINT_FILE`` when set)."""
    from keymanager.config import Settings
    from keymanager.services.container import Services

    services = Services.build(Settings())
    try:
        for n in range(appends):
            services.audit_records.append_current([(_entry(2 * n, "cli"), None), (_entry(2 * n + 1, "cli"), None)])
        services.audit_chain.emit_checkpoint(always=True)
    finally:
        services.close()


if __name__ == "__main__":
    import sys

    append_and_checkpoint(int(sys.argv[1]))
