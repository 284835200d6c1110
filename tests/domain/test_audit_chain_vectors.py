"""Known answers of the audit chain's formats: chain 1 (the single chain of versions before
migration 0013) hashes and seals as it always did; another chain starts from its own genesis."""

from __future__ import annotations

from datetime import UTC, datetime

from keymanager.domain.audit import GENESIS_HASH, AuditEntry, Outcome, chain, genesis_hash, seal_message

ENTRY = AuditEntry(
    time=datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC),
    action="key.encrypt",
    outcome=Outcome.OK,
    status=200,
    request_id="req-1",
    principal="billing",
    key_id="ab" * 16,
    key_version=1,
    client="127.0.0.1",
    details={"n": 1},
)
FIRST = "ce313b73ece189111231eec1f16a83a38336a49eb39fe0c9114fc5a8532d3c4d"
SECOND = "4e0e95364196a2722eed7ebb515b949ecf478dbcef91074ddf4f1b9e21c60560"
"""Computed by the single chain's code before migration 0013."""


def test_chain_1_hashes_and_seals_as_the_single_chain_did() -> None:
    assert genesis_hash(1) == GENESIS_HASH
    records = chain([ENTRY, ENTRY], 0, genesis_hash(1), 1)
    assert [r.hash for r in records] == [FIRST, SECOND]
    assert seal_message(2, records[1].hash) == f"keymanager-audit-seal:v1:2:{SECOND}".encode()


def test_another_chain_starts_from_a_genesis_bound_to_its_id() -> None:
    assert genesis_hash(7) == "49eb13c82bc0fb0cf2078ae5631ebd18b3477ed9d38ac08c05860584a7a5cb2d"
    assert genesis_hash(8) != genesis_hash(7)
    (first,) = chain([ENTRY], 0, genesis_hash(7), 7)
    assert (first.chain, first.hash) == (7, "e46dd3e029a2ff7a1de57eccda486abf5c3b19623a69b215f093ae2fee96393b")
