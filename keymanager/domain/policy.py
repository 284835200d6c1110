"""Key policies: which principal may use a key for which operation, and when.

A policy is a JSON object from operation to principals, with optional
``not_before`` / ``not_after`` (ISO 8601). Anything not granted is denied.

Stored and evaluated policies name principals by id, so a principal created later under a
deleted one's name inherits nothing; the API shows and takes names, and the key service
translates (:meth:`Policy.translated`). This module does not care which: a principal
reference is an opaque string.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


class Operation(enum.StrEnum):
    ENCRYPT = "encrypt"
    DECRYPT = "decrypt"
    GENERATE_DATA_KEY = "generate_data_key"
    REENCRYPT = "reencrypt"
    MAC = "mac"
    TOKENIZE = "tokenize"
    DETOKENIZE = "detokenize"
    GET_KEY_MATERIAL = "get_key_material"
    """Fetch an exportable key's material, or a registered secret's value (KMIP's Get)."""
    SIGN = "sign"
    VERIFY = "verify"
    GET_PUBLIC_KEY = "get_public_key"
    DERIVE_SHARED_SECRET = "derive_shared_secret"  # noqa: S105 (a right, not a secret)
    GENERATE_DATA_KEY_PAIR = "generate_data_key_pair"


@dataclass(frozen=True)
class Policy:
    grants: Mapping[Operation, frozenset[str]] = field(default_factory=dict)
    not_before: datetime | None = None
    not_after: datetime | None = None

    def __post_init__(self) -> None:
        # An operation granted to nobody is the same policy as one not mentioned: equal policies compare equal.
        object.__setattr__(self, "grants", {op: names for op, names in self.grants.items() if names})

    def allows(self, operation: Operation, principal: str, now: datetime | None = None) -> bool:
        """True when ``principal`` is named for ``operation`` and ``now`` is inside the validity window."""
        now = now or datetime.now(UTC)
        if self.not_before is not None and now < self.not_before:
            return False
        if self.not_after is not None and now >= self.not_after:
            return False
        return principal in self.grants.get(operation, frozenset())

    def names(self, principal: str) -> bool:
        """True when the policy names ``principal`` for any operation."""
        return any(principal in names for names in self.grants.values())

    def principals(self) -> frozenset[str]:
        """Every principal the policy names, for any operation."""
        return frozenset().union(*self.grants.values())

    def translated(self, references: Mapping[str, str]) -> Policy:
        """The same policy with each principal ``p`` replaced by ``references[p]``; principals
        absent from ``references`` are dropped (the validity window stays)."""
        grants = {
            operation: frozenset(references[p] for p in principals if p in references)
            for operation, principals in self.grants.items()
        }
        return Policy(grants=grants, not_before=self.not_before, not_after=self.not_after)

    def to_dict(self) -> dict[str, Any]:
        """The API / storage shape: every operation present, names sorted."""
        out: dict[str, Any] = {op.value: sorted(self.grants.get(op, frozenset())) for op in Operation}
        out["not_before"] = self.not_before.isoformat() if self.not_before else None
        out["not_after"] = self.not_after.isoformat() if self.not_after else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Parse the API / storage shape; raises ``ValueError`` on unknown operations or bad dates."""
        grants: dict[Operation, frozenset[str]] = {}
        not_before = not_after = None
        for name, value in data.items():
            if name == "not_before":
                not_before = _parse_time(value)
            elif name == "not_after":
                not_after = _parse_time(value)
            else:
                try:
                    operation = Operation(name)
                except ValueError:
                    raise ValueError(f"unknown policy operation {name!r}") from None
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"policy operation {name!r} must be a list of principal names")
                grants[operation] = frozenset(value)
        if not_before and not_after and not_before >= not_after:
            raise ValueError("not_before must be earlier than not_after")
        return cls(grants=grants, not_before=not_before, not_after=not_after)


def _parse_time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not an ISO 8601 time: {value!r}") from None
    else:
        raise ValueError("policy times must be ISO 8601 strings")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
