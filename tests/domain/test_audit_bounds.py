"""Every audit record has a maximum size, whatever a client sent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from keymanager.domain.audit import (
    GENESIS_HASH,
    MAX_DETAILS_BYTES,
    MAX_TEXT,
    AuditEntry,
    ChainVerifier,
    Outcome,
    bounded,
    chain,
)


def entry(**fields: object) -> AuditEntry:
    base: dict[str, object] = {"time": datetime(2026, 1, 1, tzinfo=UTC), "action": "key.read", "outcome": Outcome.OK}
    base["status"] = 200
    return AuditEntry(**{**base, **fields})  # type: ignore[arg-type]


def test_an_entry_within_the_bounds_is_kept_as_it_is() -> None:
    small = entry(principal="billing", key_id="0" * 32, client="192.0.2.1", details={"key": "cards", "items": 3})
    assert bounded(small) is small


def test_long_text_and_large_details_are_cut() -> None:
    huge = entry(
        request_id="r" * 10_000,
        principal="p" * 10_000,
        client="c" * 10_000,
        details={
            "key": "a" * 60_000,
            "list": ["x" * 1000] * 1000,
            "nested": {"deep": {"deeper": {"deepest": "y" * 1000}}},
            **{f"field{n}": n for n in range(100)},
        },
    )
    cut = bounded(huge)
    for text in (cut.request_id, cut.principal, cut.client, cut.details["key"]):
        assert isinstance(text, str) and len(text) == MAX_TEXT and text.endswith("...")
    assert len(json.dumps(dict(cut.details), separators=(",", ":"))) <= MAX_DETAILS_BYTES
    assert cut.details["truncated"] is True
    assert bounded(cut) == cut  # bounding twice changes nothing
    record = chain([huge], 0, GENESIS_HASH)[0]
    assert record.entry == cut  # the chain stores the bounded entry, and its hash covers that
    assert len(json.dumps(record.fields(), default=str)) <= 1536
    verifier = ChainVerifier(_UnusedKey(), unsealed_tail=True)  # an unsealed record: no seal to check
    assert verifier.feed(record) and verifier.finish(1, record.hash).ok


class _UnusedKey:
    """A chain key the check must not need (the record carries no seal)."""

    def sign(self, messages: Sequence[bytes]) -> list[bytes]:
        raise AssertionError("no seal to check")
