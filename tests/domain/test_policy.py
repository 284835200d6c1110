"""Key policies: parsing, serialisation, and the default-deny decision with its time window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from keymanager.domain.policy import Operation, Policy

T0 = datetime(2030, 1, 1, tzinfo=UTC)
T1 = datetime(2030, 6, 1, tzinfo=UTC)

OPERATIONS = [
    "encrypt",
    "decrypt",
    "generate_data_key",
    "reencrypt",
    "mac",
    "tokenize",
    "detokenize",
    "get_key_material",
    "sign",
    "verify",
    "get_public_key",
    "derive_shared_secret",
    "generate_data_key_pair",
]


def test_empty_policy_denies_everything() -> None:
    policy = Policy()
    for op in Operation:
        assert not policy.allows(op, "admin")
        assert not policy.allows(op, "")
    assert not policy.names("admin")


def test_from_dict_to_dict_round_trip() -> None:
    data = {
        "encrypt": ["billing", "alpha"],
        "decrypt": ["billing", "support"],
        "generate_data_key": [],
        "mac": ["search"],
        "not_before": "2030-01-01T00:00:00+00:00",
        "not_after": "2030-06-01T00:00:00Z",
    }
    policy = Policy.from_dict(data)
    assert policy.not_before == T0
    assert policy.not_after == T1
    out = policy.to_dict()
    assert out == {
        "encrypt": ["alpha", "billing"],
        "decrypt": ["billing", "support"],
        "generate_data_key": [],
        "reencrypt": [],
        "mac": ["search"],
        "tokenize": [],
        "detokenize": [],
        **{op: [] for op in OPERATIONS[7:]},
        "not_before": "2030-01-01T00:00:00+00:00",
        "not_after": "2030-06-01T00:00:00+00:00",
    }
    assert set(out) == {*OPERATIONS, "not_before", "not_after"}
    again = Policy.from_dict(out)
    assert again.to_dict() == out
    assert (again.not_before, again.not_after) == (policy.not_before, policy.not_after)
    for op in Operation:
        for name in ("alpha", "billing", "support", "search", "other"):
            assert again.allows(op, name, now=T0) == policy.allows(op, name, now=T0)


def test_to_dict_of_empty_policy_lists_every_operation() -> None:
    assert Policy().to_dict() == {**{op: [] for op in OPERATIONS}, "not_before": None, "not_after": None}
    again = Policy.from_dict(Policy().to_dict())
    assert again.to_dict() == Policy().to_dict()
    assert not any(again.allows(op, "admin") for op in Operation)


def test_allows_only_named_principal_for_named_operation() -> None:
    policy = Policy.from_dict({"encrypt": ["billing"], "decrypt": ["billing", "support"]})
    assert policy.allows(Operation.ENCRYPT, "billing")
    assert policy.allows(Operation.DECRYPT, "support")
    assert not policy.allows(Operation.ENCRYPT, "support")
    assert not policy.allows(Operation.ENCRYPT, "Billing")
    assert not policy.allows(Operation.ENCRYPT, "billing ")
    assert not policy.allows(Operation.REENCRYPT, "billing")
    assert not policy.allows(Operation.MAC, "billing")
    assert not policy.allows(Operation.GENERATE_DATA_KEY, "billing")
    assert policy.names("support") and policy.names("billing")
    assert not policy.names("other")


def test_time_window() -> None:
    policy = Policy.from_dict({"encrypt": ["app"], "not_before": T0.isoformat(), "not_after": T1.isoformat()})
    assert not policy.allows(Operation.ENCRYPT, "app", now=T0 - timedelta(microseconds=1))
    assert policy.allows(Operation.ENCRYPT, "app", now=T0)
    assert policy.allows(Operation.ENCRYPT, "app", now=T1 - timedelta(microseconds=1))
    assert not policy.allows(Operation.ENCRYPT, "app", now=T1)
    assert not policy.allows(Operation.ENCRYPT, "app", now=T1 + timedelta(days=1))
    # Outside the window the principal is still *named* (it sees the key) but may not use it.
    assert policy.names("app")


def test_time_window_defaults_to_now() -> None:
    now = datetime.now(UTC)
    past = Policy.from_dict({"encrypt": ["app"], "not_after": (now - timedelta(hours=1)).isoformat()})
    future = Policy.from_dict({"encrypt": ["app"], "not_before": (now + timedelta(hours=1)).isoformat()})
    current = Policy.from_dict(
        {
            "encrypt": ["app"],
            "not_before": (now - timedelta(hours=1)).isoformat(),
            "not_after": (now + timedelta(hours=1)).isoformat(),
        }
    )
    assert not past.allows(Operation.ENCRYPT, "app")
    assert not future.allows(Operation.ENCRYPT, "app")
    assert current.allows(Operation.ENCRYPT, "app")


def test_naive_times_are_utc_and_datetimes_accepted() -> None:
    policy = Policy.from_dict({"not_before": "2030-01-01T00:00:00", "not_after": T1})
    assert policy.not_before == T0
    assert policy.not_before.tzinfo is not None
    assert policy.not_after == T1
    other_zone = Policy.from_dict({"not_before": "2030-01-01T02:00:00+02:00"})
    assert other_zone.not_before == T0


@pytest.mark.parametrize(
    "data",
    [
        {"launch": ["app"]},
        {"Encrypt": ["app"]},
        {"admin": []},
        {"encrypt": "app"},
        {"encrypt": [1]},
        {"encrypt": None},
        {"encrypt": {"app": True}},
        {"not_before": "tomorrow"},
        {"not_after": 12},
        {"not_before": T1.isoformat(), "not_after": T0.isoformat()},
        {"not_before": T0.isoformat(), "not_after": T0.isoformat()},
    ],
)
def test_from_dict_refuses_unknown_operations_and_bad_values(data: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Policy.from_dict(data)


def test_unknown_operation_message_names_it() -> None:
    with pytest.raises(ValueError, match="unknown policy operation 'launch'"):
        Policy.from_dict({"launch": ["x"]})


def test_operations_are_exactly_the_documented_ones() -> None:
    assert [op.value for op in Operation] == OPERATIONS


def test_translated_maps_principals_and_drops_the_unknown() -> None:
    policy = Policy.from_dict(
        {"encrypt": ["billing", "gone"], "decrypt": ["support"], "not_after": "2031-01-01T00:00:00Z"}
    )
    assert policy.principals() == {"billing", "gone", "support"}
    by_id = policy.translated({"billing": "id-b", "support": "id-s"})
    assert by_id.allows(Operation.ENCRYPT, "id-b", now=T0) and not by_id.allows(Operation.ENCRYPT, "billing", now=T0)
    assert by_id.principals() == {"id-b", "id-s"}
    assert by_id.not_after == policy.not_after
    assert by_id.translated({"id-b": "billing", "id-s": "support"}).to_dict()["encrypt"] == ["billing"]
    assert Policy().principals() == frozenset()
