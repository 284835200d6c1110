"""Cost per audit record of the chain designs, through the real audit writer, in one run.

    .venv/bin/python scripts/measure_audit_chain.py [--records 2000] [--rounds 3] [--database-url URL]

Variants (each on a database of its own, interleaved round by round, median reported):

- ``plain``: the SHA-256 chain alone (the chain before issue 10, item 9);
- ``seal``: the SHA-256 chain, and one HMAC-SHA256 in the HSM per group commit sealing its last
  record (what the service does);
- ``hmac``: every record's chain value an HMAC-SHA256 in the HSM (all records of a commit in one
  trip to the HSM thread), no seal.

Each variant runs in every position of the round order in turn (order effects cancel); medians
and minima of the rounds are reported (the minimum is the least disturbed by other load).

Modes: ``sequential`` appends one record and waits for its commit before the next (a group commit
per record: light load); ``burst`` queues every record at once and waits for all (large group
commits: heavy load). Reports wall and process CPU (every thread) microseconds per record.
A throwaway SoftHSM token and SQLite files are made in a temporary directory (PostgreSQL when
``--database-url`` names a server database: each variant then gets tables of its own database,
which must be empty and is migrated here).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TMP = Path(tempfile.mkdtemp(prefix="km-measure-audit-"))
os.environ["SOFTHSM2_CONF"] = str(TMP / "softhsm2.conf")

from keymanager.config import SOFTHSM_MODULE  # noqa: E402 (after SOFTHSM2_CONF)
from keymanager.db import audit as db_audit  # noqa: E402
from keymanager.db import make_engine, migrate  # noqa: E402
from keymanager.db.audit import AuditStore  # noqa: E402
from keymanager.domain.audit import AuditEntry, AuditRecord, Outcome, canonical_fields  # noqa: E402
from keymanager.hsm import Hsm  # noqa: E402
from keymanager.hsm.softhsm import ensure_softhsm_token, write_softhsm_conf  # noqa: E402
from keymanager.services.audit import AuditLog  # noqa: E402

PIN = "measure-pin-1234"
SEALING = db_audit.chain


def entry(n: int) -> AuditEntry:
    return AuditEntry(
        time=datetime.now(UTC),
        action="key.encrypt",
        outcome=Outcome.OK,
        status=200,
        request_id=f"{n:032x}",
        principal="billing",
        key_id="ab" * 16,
        key_version=1,
        client="127.0.0.1",
    )


def hmac_chain(key: Any) -> Callable[[Iterable[AuditEntry], int, str], list[AuditRecord]]:
    """A ``chain`` whose chain values are HMAC-SHA256 in the HSM; one trip per commit.

    Each value depends on the previous one, so the messages are built with the previous value
    computed in the same trip: a real implementation would chain inside the HSM call; this one
    signs the canonical JSON of each record with its predecessor's SHA-256 link (same number of
    HSM operations and bytes, one trip), which is what the cost depends on.
    """

    def chain(entries: Iterable[AuditEntry], last_seq: int, last_hash: str) -> list[AuditRecord]:
        listed = list(entries)
        messages, prev = [], last_hash
        for offset, item in enumerate(listed, start=1):
            data = json.dumps(canonical_fields(last_seq + offset, prev, item), sort_keys=True, separators=(",", ":"))
            messages.append(data.encode())
            prev = hashlib.sha256(messages[-1]).hexdigest()
        macs = key.sign(messages)
        records, prev = [], last_hash
        for offset, (item, mac) in enumerate(zip(listed, macs, strict=True), start=1):
            records.append(AuditRecord(seq=last_seq + offset, entry=item, prev_hash=prev, hash=mac.hex()))
            prev = mac.hex()
        return records

    return chain


def run(log: AuditLog, records: int, mode: str) -> tuple[float, float]:
    """Wall and CPU seconds to append ``records`` through ``log``."""
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "sequential":
        for n in range(records):
            log.submit(entry(n)).result(timeout=60)
    else:
        for future in [log.submit(entry(n)) for n in range(records)]:
            future.result(timeout=60)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="plain,seal,hmac")
    parser.add_argument("--modes", default="sequential,burst")
    parser.add_argument("--database-url", action="append", help="one per variant, in order (default SQLite)")
    args = parser.parse_args()
    variants = args.variants.split(",")
    write_softhsm_conf(TMP / "softhsm2.conf", TMP / "tokens")
    ensure_softhsm_token(SOFTHSM_MODULE, "measure", PIN, "measure-so-pin", TMP / "softhsm2.conf")
    hsm = Hsm(SOFTHSM_MODULE, "measure", PIN)
    key = None
    if variants != ["plain"]:  # the plain variant also runs on the code before the audit key existed
        from keymanager.hsm.audit_key import AuditKey

        key = AuditKey(hsm)
        key.ensure(create=True)
    urls = args.database_url or [f"sqlite:///{TMP / v}.db" for v in variants]
    engines = {v: make_engine(url) for v, url in zip(variants, urls, strict=True)}
    for engine in engines.values():
        migrate(engine)
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for round_number in range(args.rounds):
            for mode in args.modes.split(","):
                shift = round_number % len(variants)  # each variant in each position: order effects cancel
                for variant in variants[shift:] + variants[:shift]:
                    db_audit.chain = hmac_chain(key) if variant == "hmac" else SEALING  # type: ignore[assignment]
                    store = AuditStore(engines[variant], key) if variant == "seal" else AuditStore(engines[variant])
                    log = AuditLog(store)
                    log.submit(entry(0)).result(timeout=60)  # writer thread and connection warm
                    batches = log.batches
                    wall, cpu = run(log, args.records, mode)
                    results.setdefault((mode, variant), []).append((wall, cpu))
                    print(
                        f"  {mode:10} {variant:5} {wall / args.records * 1e6:8.1f} us wall "
                        f"{cpu / args.records * 1e6:8.1f} us CPU per record, "
                        f"{args.records / max(log.batches - batches, 1):.1f} records per commit",
                        file=sys.stderr,
                    )
                    log.close()
                    store.close()
        print(f"{args.rounds} rounds, {args.records} records each, {engines[variants[0]].dialect.name}; per record:")
        print(f"{'mode':10} {'chain':5} {'wall median':>12} {'CPU median':>11} {'CPU min':>8}  (microseconds)")
        for (mode, variant), runs in sorted(results.items()):
            wall = statistics.median(w for w, _ in runs) / args.records * 1e6
            cpu = statistics.median(c for _, c in runs) / args.records * 1e6
            low = min(c for _, c in runs) / args.records * 1e6
            print(f"{mode:10} {variant:5} {wall:12.1f} {cpu:11.1f} {low:8.1f}")
    finally:
        db_audit.chain = SEALING  # type: ignore[assignment]
        for engine in engines.values():
            engine.dispose()
        hsm.close()
        shutil.rmtree(TMP, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
