"""The service's table of key types as a client reads it (``GET /v1/key-specs``).

``key_specs()`` of both clients returns one :class:`KeySpec` per row: what may be created and,
per usage, the algorithms a key of that spec accepts. The names alone, without a call, are in
``keymanager_sdk._spec_names`` (generated from the service's table; kmctl's choices read it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KeySpec:
    """One key spec: its native ``name`` (a key's ``algorithm``), AWS KMS ``kms_key_spec`` (None
    when it has none), PKCS#11 ``key_type``, ``key_bits`` or ``curve``, whether it is
    ``asymmetric``, the ``default_usage`` a create naming none gets (None: one must be named) and
    ``usages``: each usage it may be created for, with the algorithms that usage allows. How the
    doors name it: ``mode`` (how its AES object seals: ``CBC_HMAC``, ``GCM``, ``CBC_PAD``),
    ``transit_type`` (Vault Transit's key type), ``xks_spec`` (AWS XKS's ``keySpec``),
    ``kmip_algorithm`` and ``kmip_length`` (KMIP's Cryptographic Algorithm and Length); each None
    when the spec has none or the door does not serve it, and from a server older than these fields."""

    name: str
    kms_key_spec: str | None
    key_type: str
    key_bits: int | None
    curve: str | None
    asymmetric: bool
    default_usage: str | None
    usages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    mode: str | None = None
    transit_type: str | None = None
    xks_spec: str | None = None
    kmip_algorithm: str | None = None
    kmip_length: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeySpec:
        return cls(
            name=str(data["name"]),
            kms_key_spec=data.get("kms_key_spec"),
            key_type=str(data["key_type"]),
            key_bits=data.get("key_bits"),
            curve=data.get("curve"),
            asymmetric=bool(data["asymmetric"]),
            default_usage=data.get("default_usage"),
            usages={str(u): tuple(str(a) for a in algs) for u, algs in (data.get("usages") or {}).items()},
            mode=data.get("mode"),
            transit_type=data.get("transit_type"),
            xks_spec=data.get("xks_spec"),
            kmip_algorithm=data.get("kmip_algorithm"),
            kmip_length=data.get("kmip_length"),
        )


def key_specs_of(data: Mapping[str, Any]) -> list[KeySpec]:
    """The rows of a ``GET /v1/key-specs`` answer."""
    return [KeySpec.from_json(row) for row in data["specs"]]
