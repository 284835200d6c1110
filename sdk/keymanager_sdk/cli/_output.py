"""kmctl's output: ``--output table`` (default, through ``rich``), ``json`` or ``text``, after an
optional ``--query`` (JMESPath, as the AWS CLI's).

What is printed is always the JSON shape of the result (``plain``): the query applies to that
shape, so ``--query token --output text`` prints a new principal's token alone. ``text`` is the
AWS CLI's: a scalar as it is, a list of scalars on one line separated by tabs, one line per
object or list in a list (its values, tab-separated), ``name<TAB>value`` lines for one object. An empty list prints
nothing on stdout (``[]`` with ``json``) and a note on stderr.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

from keymanager_sdk._access_keys import AccessKey, AppRole
from keymanager_sdk._approvals import Approval
from keymanager_sdk._models import AuditRecord, Encrypted, Key, Principal
from keymanager_sdk._objects import ManagedObject
from keymanager_sdk.cli._config import UsageError

OUTPUTS = ("table", "json", "text")
SHOWN_ONCE = frozenset({"token", "secret_access_key", "secret_id", "plaintext"})
"""Fields hidden from ``repr`` that kmctl prints: secrets the service shows only in a creation's
answer, and a data key's plaintext (what ``kmctl datakey`` is for)."""
AUDIT_COLUMNS = ("seq", "time", "principal", "action", "key", "key_version", "outcome", "status")
COLUMNS: dict[type, tuple[str, ...]] = {
    Key: ("name", "id", "algorithm", "state", "primary_version", "min_decryption_version", "description"),
    Principal: ("name", "role", "cert_subject", "created_at"),
    AccessKey: ("access_key_id", "created_at"),
    AppRole: ("role_id", "created_at"),
    Approval: ("id", "state", "operations", "target", "requester", "approvals_required", "expires_at"),
    ManagedObject: ("id", "object_type", "state", "owner", "created_at", "updated_at"),
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


def query(data: Any, expression: str | None) -> Any:
    """``data`` through the JMESPath ``expression`` (unchanged when None); a bad one is a ``UsageError``."""
    if expression is None:
        return data
    import jmespath  # type: ignore[import-untyped]
    from jmespath.exceptions import JMESPathError  # type: ignore[import-untyped]

    try:
        return jmespath.search(expression, data)
    except JMESPathError as exc:
        raise UsageError(f"--query {expression!r}: {exc}") from exc


def show(
    value: Any,
    output: str = "table",
    expression: str | None = None,
    out: TextIO | None = None,
    what: str = "records",
) -> None:
    """Print a result as ``output`` says, after ``expression``; ``what`` names the items of a list
    in the note that an empty list prints on stderr."""
    out = out or sys.stdout
    columns = COLUMNS.get(type(value[0]), ()) if isinstance(value, list) and value else ()
    data = query(plain(value), expression)
    if data == [] or data is None:
        if output == "json":
            out.write(json.dumps(data) + "\n")
        if data == []:
            print(f"kmctl: no {what}", file=sys.stderr)
        return
    if output == "json":
        out.write(json.dumps(data, indent=2) + "\n")
    elif output == "text":
        out.write("".join(line + "\n" for line in _text_lines(data, columns if expression is None else ())))
    else:
        _table(data, columns if expression is None else (), out)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def _text_lines(data: Any, columns: Sequence[str]) -> list[str]:
    if isinstance(data, list):
        if all(isinstance(item, dict) for item in data):
            names = columns or list(data[0])
            return ["\t".join(_cell(item.get(c)) for c in names) for item in data]
        if all(isinstance(item, list) for item in data):
            return ["\t".join(_cell(cell) for cell in item) for item in data]
        return ["\t".join(_cell(item) for item in data)]
    if isinstance(data, dict):
        return [f"{name}\t{_cell(item)}" for name, item in data.items()]
    return [_cell(data)]


def _table(data: Any, columns: Sequence[str], out: TextIO) -> None:
    """Lists of objects as a table under an upper-case header; one object as ``field  value`` rows."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, width=None if out.isatty() else 10_000, soft_wrap=True)
    if isinstance(data, list) and data and all(isinstance(item, dict) for item in data):
        names = list(columns or data[0])
        table = Table(*[name.upper() for name in names], box=None, pad_edge=False, header_style="bold")
        for item in data:
            table.add_row(*[Text(_cell(item.get(name))) for name in names])
    elif isinstance(data, dict):
        table = Table(box=None, pad_edge=False, show_header=False)
        table.add_column(style="bold")
        table.add_column()
        for name, item in data.items():
            table.add_row(Text(name), Text(_cell(item)))
    else:
        for line in _text_lines(data, ()):
            out.write(line + "\n")
        return
    console.print(table, highlight=False)


def emit(args: Any, value: Any, what: str = "records") -> int:
    """Print ``value`` as the command line asks (``--output``, ``--query``); exit code 0."""
    show(value, args.output, args.query, sys.stdout, what)
    return 0


def structured(args: Any) -> bool:
    """Whether the command line asks for the result's JSON shape (``--output json`` or ``--query``)
    rather than a command's raw answer (a ciphertext, a token, a plaintext)."""
    return bool(args.output == "json" or args.query is not None)
