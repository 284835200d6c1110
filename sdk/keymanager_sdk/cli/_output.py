"""kmctl's output: readable tables by default, JSON with ``--json``."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

from keymanager_sdk._access_keys import AccessKey
from keymanager_sdk._models import AuditRecord, Encrypted, Key, Principal

SHOWN_ONCE = frozenset({"token", "secret_access_key"})
"""Secrets hidden from ``repr`` that kmctl prints: the service shows them only in a creation's answer."""
AUDIT_COLUMNS = ("seq", "time", "principal", "action", "key", "key_version", "outcome", "status")
COLUMNS: dict[type, tuple[str, ...]] = {
    Key: ("name", "id", "algorithm", "state", "primary_version", "min_decryption_version", "description"),
    Principal: ("name", "role", "cert_subject", "created_at"),
    AccessKey: ("access_key_id", "created_at"),
    AuditRecord: AUDIT_COLUMNS,
    dict: AUDIT_COLUMNS,  # audit_rows
}


def audit_rows(records: Sequence[AuditRecord], key_names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Audit records as JSON-ready objects with ``key_name`` (None when unknown) and ``key`` (name, else id)."""
    rows = []
    for record in records:
        row = plain(record)
        name = key_names.get(record.key_id or "")
        row["key_name"] = name
        row["key"] = name or record.key_id
        rows.append(row)
    return rows


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as objects, times as ISO 8601, bytes as base64."""
    if isinstance(value, Encrypted):
        return {"ciphertext": value.ciphertext, "key_id": value.key_id, "key_version": value.key_version}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return {f.name: plain(getattr(value, f.name)) for f in fields if f.repr or f.name in SHOWN_ONCE}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    value = plain(value)
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


def table(rows: Sequence[Any], columns: Sequence[str], out: TextIO) -> None:
    """Rows as left-aligned columns under an upper-case header."""
    cells = [[_cell(row[c] if isinstance(row, dict) else getattr(row, c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    for line in [[c.upper() for c in columns], *cells]:
        out.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n")


def record(value: Any, out: TextIO) -> None:
    """One object as ``field: value`` lines."""
    data = plain(value)
    width = max(len(k) for k in data)
    for name, item in data.items():
        out.write(f"{name.ljust(width)}  {_cell(item)}\n")


def show(value: Any, as_json: bool, out: TextIO) -> None:
    """Print a result: JSON, a table for lists of known records, or ``field: value`` lines."""
    if as_json:
        out.write(json.dumps(plain(value), indent=2) + "\n")
    elif isinstance(value, list):
        columns = COLUMNS.get(type(value[0]), ()) if value else ("result",)
        table(value, columns, out)
    elif dataclasses.is_dataclass(value):
        record(value, out)
    elif value is not None:
        out.write(f"{value}\n")
