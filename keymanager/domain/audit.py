"""Audit records and their hash chain.

Each record carries its sequence number and the hash of the record before it; its own hash
is SHA-256 over the canonical JSON of every other field. Editing a record changes its hash;
deleting or reordering records breaks a ``prev_hash`` link or the sequence; removing records
at the end is seen against the chain head (last sequence number and hash) kept beside them.
Records never hold plaintext, ciphertext, tokens or key material.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

GENESIS_HASH = "0" * 64


class Outcome(enum.StrEnum):
    OK = "ok"
    DENIED = "denied"
    ERROR = "error"


@dataclass(frozen=True)
class AuditEntry:
    """What happened, before it has a place in the chain."""

    time: datetime
    action: str
    outcome: Outcome
    status: int
    request_id: str = ""
    principal: str | None = None
    key_id: str | None = None
    key_version: int | None = None
    client: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditRecord:
    """An entry with its place in the chain."""

    seq: int
    entry: AuditEntry
    prev_hash: str
    hash: str

    def fields(self) -> dict[str, Any]:
        """Every field of the record (as stored and as returned by the API), hash last."""
        return {**canonical_fields(self.seq, self.prev_hash, self.entry), "hash": self.hash}


def canonical_fields(seq: int, prev_hash: str, entry: AuditEntry) -> dict[str, Any]:
    return {
        "seq": seq,
        "prev_hash": prev_hash,
        "time": entry.time.isoformat(timespec="microseconds"),
        "request_id": entry.request_id,
        "principal": entry.principal,
        "action": entry.action,
        "key_id": entry.key_id,
        "key_version": entry.key_version,
        "outcome": entry.outcome.value,
        "status": entry.status,
        "client": entry.client,
        "details": dict(entry.details),
    }


def record_hash(seq: int, prev_hash: str, entry: AuditEntry) -> str:
    """SHA-256 (hex) of the canonical JSON of a record's fields other than its hash."""
    data = json.dumps(canonical_fields(seq, prev_hash, entry), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def chain(entries: Iterable[AuditEntry], last_seq: int, last_hash: str) -> list[AuditRecord]:
    """Place ``entries`` after the record ``last_seq`` whose hash is ``last_hash``."""
    records = []
    for entry in entries:
        last_seq += 1
        digest = record_hash(last_seq, last_hash, entry)
        records.append(AuditRecord(seq=last_seq, entry=entry, prev_hash=last_hash, hash=digest))
        last_hash = digest
    return records


@dataclass(frozen=True)
class AuditQuery:
    """Filters of an audit listing; records with ``seq > after``, at most ``limit``."""

    key_id: str | None = None
    principal: str | None = None
    action: str | None = None
    since: datetime | None = None
    after: int = 0
    limit: int = 100


@dataclass(frozen=True)
class Verification:
    ok: bool
    records: int
    first_broken_seq: int | None = None
    reason: str | None = None


class ChainVerifier:
    """Checks records fed in sequence order, then the chain head; keeps O(1) state."""

    def __init__(self) -> None:
        self._count = 0
        self._seq = 0
        self._hash = GENESIS_HASH
        self._broken: Verification | None = None

    def feed(self, record: AuditRecord) -> bool:
        """Check one more record; False once the chain is broken (later records are not read)."""
        if self._broken is not None:
            return False
        problem = None
        if record.seq != self._seq + 1:
            problem = f"expected record {self._seq + 1}, found {record.seq} (records missing or reordered)"
        elif record.prev_hash != self._hash:
            problem = "link to the previous record broken (a record was removed, inserted or swapped)"
        elif record_hash(record.seq, record.prev_hash, record.entry) != record.hash:
            problem = "record contents do not match its hash (the record was edited)"
        if problem is not None:
            self._broken = Verification(False, self._count, self._seq + 1, problem)
            return False
        self._count += 1
        self._seq, self._hash = record.seq, record.hash
        return True

    def finish(self, head_seq: int, head_hash: str) -> Verification:
        """The result, checking that the last record is the chain head."""
        if self._broken is not None:
            return self._broken
        if (head_seq, head_hash) != (self._seq, self._hash):
            return Verification(False, self._count, self._seq + 1, "records missing at the end of the chain")
        return Verification(True, self._count)


def with_details(entry: AuditEntry, **details: Any) -> AuditEntry:
    return replace(entry, details={**entry.details, **details})
