"""Audit records, their hash chains and their seals.

The log is made of chains (one per writer, see ``keymanager.db.audit``), each checked on its
own. Each record carries its sequence number in its chain and the hash of the record before it
(for the first record, :func:`genesis_hash` of the chain's id); its own hash
(the chain value) is SHA-256 over the canonical JSON of every other field. Editing a record
changes its hash; deleting or reordering records breaks a ``prev_hash`` link or the sequence.

A SHA-256 chain alone can be recomputed by anyone who can write the database, so every
append (one group commit) also *seals* its last record: ``seal`` is HMAC-SHA256, computed in
the HSM with the audit key (:class:`ChainKey`), over that record's sequence number and chain
value. A seal covers its record and, through the chain, every record before it; the last
record of a valid chain is always sealed. Records before the first seal are those written
before the chain was keyed (migration 0004), covered by that first seal. Removing records
at the end back to an earlier seal is only seen against a checkpoint kept outside the
database (:mod:`keymanager.domain.checkpoint`). A chain is checked by
:class:`~keymanager.domain.audit_verification.ChainVerifier`.
Records never hold plaintext, ciphertext, tokens or key material, and every record has a
maximum size (:func:`bounded`): whatever a client sends, a record stays around 1 KiB.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from keymanager.domain.checkpoint import LEGACY_CHAIN

GENESIS_HASH = "0" * 64
MAX_TEXT = 128
"""Longest text of any field of a record; longer text keeps its first characters and ends in ``...``."""
MAX_DETAILS_ITEMS = 16
"""Most items of the details object, and of any list or object inside it."""
MAX_DETAILS_BYTES = 512
"""Longest details object, as compact JSON; items past it are dropped and ``"truncated": true`` added."""
_CUT = "..."


class Outcome(enum.StrEnum):
    OK = "ok"
    DENIED = "denied"
    ERROR = "error"


def outcome_of(status: int) -> Outcome:
    """The outcome of an answer of (HTTP-like) ``status``: every door's records say it alike."""
    if status < 400:
        return Outcome.OK
    if status in (401, 403):
        return Outcome.DENIED
    return Outcome.ERROR


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
    """An entry with its place in its chain (and, once stored, in the log)."""

    seq: int
    entry: AuditEntry
    prev_hash: str
    hash: str
    seal: str | None = None
    """Hex HMAC-SHA256 of :func:`seal_message` in the HSM; set on the last record of each append."""
    chain: int = LEGACY_CHAIN
    """The chain it belongs to (its first link is :func:`genesis_hash` of this id)."""
    position: int = 0
    """Its place in the whole log, given by the database as it was stored (0 before): listings
    follow it. Not hashed: it orders the chains' records among each other, each chain's own
    order is its sequence numbers."""
    canonical: str = field(default="", compare=False, repr=False)
    """The canonical JSON its hash was computed over, as :func:`chain` encoded it (empty on a record
    read back): a writer that stores JSON reuses it instead of encoding the fields again."""

    def fields(self) -> dict[str, Any]:
        """Every field of the record (as stored and as returned by the API), hash and seal last."""
        return {
            "chain": self.chain,
            "position": self.position,
            **canonical_fields(self.seq, self.prev_hash, self.entry),
            "hash": self.hash,
            "seal": self.seal,
        }


class ChainKey(Protocol):
    """The audit key: HMAC-SHA256 computed in the HSM with a key nobody can extract."""

    def sign(self, messages: Sequence[bytes]) -> list[bytes]:
        """The HMAC-SHA256 of each message, in order (one trip to the HSM)."""
        ...


def genesis_hash(chain: int) -> str:
    """The ``prev_hash`` of a chain's first record: the chain's id bound into every record of it,
    so records cannot be passed off as another chain's. Chain 1, the single chain of earlier
    versions, keeps the zeros it always began with."""
    if chain == LEGACY_CHAIN:
        return GENESIS_HASH
    return hashlib.sha256(f"keymanager-audit-chain:v1:{chain}".encode()).hexdigest()


def seal_message(seq: int, chain_value: str) -> bytes:
    """What a seal authenticates: the record's sequence number and chain value, domain-separated."""
    return f"keymanager-audit-seal:v1:{seq}:{chain_value}".encode()


def seal(key: ChainKey, record: AuditRecord) -> AuditRecord:
    """``record`` with its seal, computed with ``key``."""
    return replace(record, seal=key.sign([seal_message(record.seq, record.hash)])[0].hex())


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


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
"""``json.dumps(…, sort_keys=True, separators=(",", ":"))``, made once (it keeps no state between calls)."""


def record_hash(seq: int, prev_hash: str, entry: AuditEntry) -> str:
    """SHA-256 (hex) of the canonical JSON of a record's fields other than its hash."""
    return _hashed(seq, prev_hash, entry)[0]


def _hashed(seq: int, prev_hash: str, entry: AuditEntry) -> tuple[str, str]:
    """A record's hash and the canonical JSON it is computed over."""
    data = _CANONICAL_JSON.encode(canonical_fields(seq, prev_hash, entry))
    return hashlib.sha256(data.encode()).hexdigest(), data


def chain(
    entries: Iterable[AuditEntry], last_seq: int, last_hash: str, chain_id: int = LEGACY_CHAIN
) -> list[AuditRecord]:
    """Place ``entries`` (each :func:`bounded`) after the record ``last_seq`` of chain ``chain_id``
    whose hash is ``last_hash``."""
    records = []
    for entry in map(bounded, entries):
        last_seq += 1
        digest, canonical = _hashed(last_seq, last_hash, entry)
        records.append(
            AuditRecord(
                seq=last_seq, entry=entry, prev_hash=last_hash, hash=digest, chain=chain_id, canonical=canonical
            )
        )
        last_hash = digest
    return records


@dataclass(frozen=True)
class AuditQuery:
    """Filters of an audit listing; records with ``position > after`` (and ``position < before``
    when given), at most ``limit``, oldest first, or newest first with ``newest_first``."""

    key_id: str | None = None
    principal: str | None = None
    action: str | None = None
    outcome: Outcome | None = None
    since: datetime | None = None
    after: int = 0
    limit: int = 100
    before: int | None = None
    newest_first: bool = False


@dataclass(frozen=True)
class Verification:
    """The result of checking the chains: ``records`` found good (before the break, if any);
    when broken, the chain and the sequence number of the first record that is not, and why."""

    ok: bool
    records: int
    first_broken_seq: int | None = None
    reason: str | None = None
    chain: int | None = None
    """The broken chain (None when every chain verified)."""


def bounded(entry: AuditEntry) -> AuditEntry:
    """``entry`` within the size of a record: text fields cut to :data:`MAX_TEXT` characters, details
    to :data:`MAX_DETAILS_ITEMS` items of bounded values and :data:`MAX_DETAILS_BYTES` of JSON.

    An entry within the bounds is returned unchanged, so bounding twice changes nothing.
    """
    return entry if _plainly_within_bounds(entry) else _bounded_in_full(entry)


def _bounded_in_full(entry: AuditEntry) -> AuditEntry:
    """:func:`bounded`, every field checked and cut where it must be."""
    details = _bounded_value(dict(entry.details), depth=0)
    assert isinstance(details, dict)
    if len(_json(details)) > MAX_DETAILS_BYTES:
        details = _fitted(details)
    cut = replace(
        entry,
        action=_cut(entry.action),
        request_id=_cut(entry.request_id),
        principal=_cut_optional(entry.principal),
        key_id=_cut_optional(entry.key_id),
        client=_cut_optional(entry.client),
        details=details,
    )
    return entry if cut == entry else cut


def _plainly_within_bounds(entry: AuditEntry) -> bool:
    """True when bounding ``entry`` certainly changes nothing, told without encoding it: short text
    fields and flat details of short printable ASCII text and small scalars, whose JSON cannot
    exceed :data:`MAX_DETAILS_BYTES`. False also when in doubt (:func:`bounded` then checks in full).
    """
    details = entry.details
    if type(details) is not dict or len(details) > MAX_DETAILS_ITEMS:
        return False
    if len(entry.action) > MAX_TEXT or len(entry.request_id) > MAX_TEXT:
        return False
    for text in (entry.principal, entry.key_id, entry.client):
        if text is not None and len(text) > MAX_TEXT:
            return False
    size = 1  # the braces, less the comma the first item does not have
    for name, value in details.items():
        if type(name) is not str or not _plain_text(name):
            return False
        if type(value) is str:
            if not _plain_text(value):
                return False
            size += 2 * len(value) + 2  # at most: every character escaped, and the quotes
        elif value is None or type(value) is bool or (type(value) is int and -_SMALL_INT < value < _SMALL_INT):
            size += 20
        else:
            return False
        size += 2 * len(name) + 4  # the quoted name, the colon and a comma
    return size <= MAX_DETAILS_BYTES


_SMALL_INT = 10**18
"""Integers of fewer than 20 characters in JSON."""


def _plain_text(text: str) -> bool:
    """Text no longer than :data:`MAX_TEXT` of printable ASCII (in JSON, at most two characters each)."""
    return len(text) <= MAX_TEXT and text.isascii() and text.isprintable()


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - len(_CUT)] + _CUT


def _cut_optional(text: str | None) -> str | None:
    return None if text is None else _cut(text)


def _bounded_value(value: Any, depth: int) -> Any:
    """``value`` with its text cut and its containers shortened (deeper ones become text); a value
    JSON cannot hold is left as it is, for the store to refuse."""
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, Mapping | list | tuple) and depth >= 2:
        return _cut(_json(value))
    if isinstance(value, Mapping):
        items = list(value.items())[:MAX_DETAILS_ITEMS]
        return {_cut(str(k)): _bounded_value(v, depth + 1) for k, v in items}
    if isinstance(value, list | tuple):
        return [_bounded_value(v, depth + 1) for v in list(value)[:MAX_DETAILS_ITEMS]]
    return value


def _fitted(details: dict[str, Any]) -> dict[str, Any]:
    """The first items of ``details`` that fit in :data:`MAX_DETAILS_BYTES` with ``"truncated": true``."""
    kept: dict[str, Any] = {"truncated": True}
    for name, value in details.items():
        if name != "truncated" and len(_json({**kept, name: value})) <= MAX_DETAILS_BYTES:
            kept[name] = value
    return kept


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
