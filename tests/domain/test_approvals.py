"""The rules of dual control, pure (issue 40): parsing refuses what it cannot take; the stricter of
every rule wins; a digest binds operations, target, arguments and requester; which key changes are
guarded."""

from __future__ import annotations

import pytest

from keymanager.domain.approvals import (
    Guarded,
    Proposal,
    Rule,
    RuleError,
    combined,
    eligible,
    guarded_update,
    parse_rules,
)
from keymanager.domain.policy import Operation, Policy


@pytest.mark.parametrize(
    "rules",
    [
        [],
        {"key.nuke": {"approvals": 1}},
        {"key.delete": {"approvals": 0}},
        {"key.delete": {"approvals": True}},
        {"key.delete": {"approvals": 11}},
        {"key.delete": {"approvals": 1, "ttl_hours": 721}},
        {"key.delete": {"approvals": 1, "approvers": "alice"}},
        {"key.delete": {"approvals": 1, "approvers": [""]}},
        {"key.delete": {"approvals": 1, "quorum": 2}},
    ],
    ids=["not-an-object", "unknown", "zero", "bool", "too-many", "too-long", "text", "empty-name", "unknown-field"],
)
def test_bad_rules_are_refused(rules: object) -> None:
    with pytest.raises(RuleError):
        parse_rules(rules)


def test_the_stricter_rule_wins() -> None:
    service = {Guarded.KEY_DELETE: Rule(1, frozenset({"a", "b", "c"}), 48)}
    key = {Guarded.KEY_DELETE: Rule(2, frozenset({"b", "c", "d"}), 24), Guarded.KEY_EXPORT: Rule(3)}
    assert combined([Guarded.KEY_DELETE], service, key) == Rule(2, frozenset({"b", "c"}), 24)
    assert combined([Guarded.KEY_DELETE, Guarded.KEY_EXPORT], service, key) == Rule(3, frozenset({"b", "c"}), 24)
    assert combined([Guarded.KEY_DISABLE], service, key) is None
    assert eligible(Rule(1), {"a", "b"}, "a") == {"b"}


def test_the_digest_binds_every_part() -> None:
    proposal = Proposal((Guarded.KEY_DELETE,), "k1", {"pending_days": 7})
    same = Proposal((Guarded.KEY_DELETE,), "k1", {"pending_days": 7})
    assert proposal.digest("r1") == same.digest("r1")
    others = [
        Proposal((Guarded.KEY_DISABLE,), "k1", {"pending_days": 7}).digest("r1"),
        Proposal((Guarded.KEY_DELETE,), "k2", {"pending_days": 7}).digest("r1"),
        Proposal((Guarded.KEY_DELETE,), "k1", {"pending_days": 8}).digest("r1"),
        proposal.digest("r2"),
    ]
    assert proposal.digest("r1") not in others and len(set(others)) == 4


def test_which_key_changes_are_guarded() -> None:
    before = Policy({Operation.DECRYPT: frozenset({"a"}), Operation.ENCRYPT: frozenset({"a"})})
    wider = Policy({Operation.DECRYPT: frozenset({"a", "b"})})
    encrypt_only = Policy({Operation.ENCRYPT: frozenset({"a", "b"}), Operation.DECRYPT: frozenset({"a"})})
    assert guarded_update(was_enabled=True, enabled=False, before=before, after=wider) == (
        Guarded.KEY_DISABLE,
        Guarded.KEY_GRANT,
    )
    assert guarded_update(was_enabled=True, enabled=None, before=before, after=encrypt_only) == ()
    assert guarded_update(was_enabled=False, enabled=False, before=before, after=None) == ()
    assert guarded_update(was_enabled=True, enabled=True, before=wider, after=before) == ()
