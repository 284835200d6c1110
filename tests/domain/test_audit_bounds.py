"""Every audit record has a maximum size, whatever a client sent."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime

from keymanager.domain.audit import (
    GENESIS_HASH,
    MAX_DETAILS_BYTES,
    MAX_DETAILS_ITEMS,
    MAX_TEXT,
    AuditEntry,
    Outcome,
    _bounded_in_full,
    bounded,
    chain,
)
from keymanager.domain.audit_verification import ChainVerifier


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


def test_the_quick_check_keeps_only_what_full_bounding_keeps() -> None:
    """Entries near every bound (long text, escapes, many items, big numbers): bounded() gives
    what checking every field in full gives."""
    rng = random.Random(14)
    alphabet = 'ab"\\/ \x7f\x1fé\U0001f600'

    def text(limit: int) -> str:
        length = rng.choice([rng.randint(0, 12), rng.randint(0, limit)])
        return "".join(rng.choice(alphabet[:3] if rng.random() < 0.7 else alphabet) for _ in range(length))

    values = [
        lambda: text(MAX_TEXT + 4),
        lambda: rng.choice([None, True, 0, -(10**19), 10**18 - 1, 1.5, [1], {"a": 1}]),
    ]
    kept = 0
    for _ in range(3000):
        details = {text(MAX_TEXT + 4): rng.choice(values)() for _ in range(rng.randint(0, MAX_DETAILS_ITEMS + 2))}
        sample = entry(request_id=text(MAX_TEXT + 2), principal=rng.choice([None, text(MAX_TEXT + 2)]), details=details)
        assert bounded(sample) == _bounded_in_full(sample)
        kept += bounded(sample) is sample
    assert 300 < kept < 2700, kept  # both ways were taken


class _UnusedKey:
    """A chain key the check must not need (the record carries no seal)."""

    def sign(self, messages: Sequence[bytes]) -> list[bytes]:
        raise AssertionError("no seal to check")
