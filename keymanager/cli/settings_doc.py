"""``keymanager settings``: the table of every setting, made from ``keymanager/config.py``.

One row per field of ``Settings``: its variable (``KM_`` + the name), its type, its default and
its meaning (the docstring under the field in ``config.py``). ``docs/configuration.md`` holds the
table between ``<!-- settings:start -->`` and ``<!-- settings:end -->``; ``keymanager settings
--update docs/configuration.md`` rewrites that part (and a test fails while it is stale).
"""

from __future__ import annotations

import ast
import inspect
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic_core import PydanticUndefined

from keymanager import config
from keymanager.config import Settings

START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def _docstrings() -> dict[str, str]:
    """Field name → the string literal right under its annotated assignment in ``Settings``."""
    tree = ast.parse(inspect.getsource(config))
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == Settings.__name__:
            body = node.body
            for field, after in zip(body, [*body[1:], None], strict=True):
                if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
                    continue
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                    text = " ".join(str(after.value.value).split())
                    found[field.target.id] = text.replace("``", "`")
    return found


def _type(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{choice}`" for choice in typing.get_args(annotation))
    text = getattr(annotation, "__name__", None) or str(annotation)
    for module in ("pathlib.", "typing.", "pydantic.types."):
        text = text.replace(module, "")
    return text.replace("|", "\\|")


def _default(value: Any) -> str:
    if value is None or value is PydanticUndefined:
        return "unset"
    if isinstance(value, SecretStr):
        return "development value"
    return f"`{value}`"


def table() -> str:
    """The Markdown table of every setting."""
    notes = _docstrings()
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        meaning = notes.get(name, "").replace("|", "\\|")
        rows.append(f"| `KM_{name.upper()}` | {_type(field.annotation)} | {_default(field.default)} | {meaning} |")
    return "\n".join(rows) + "\n"


def updated(page: str) -> str:
    """``page`` with the part between the markers replaced by the current table."""
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table()}{END}{tail}"


def run(update: str | None) -> int:
    """Print the table, or rewrite the table in the page ``update``; exit 0 (2 for a page without markers)."""
    if update is None:
        print(table(), end="")
        return 0
    path = Path(update)
    page = path.read_text()
    if START not in page or END not in page:
        print(f"keymanager settings: {path} has no {START} … {END} part", file=sys.stderr)
        return 2
    path.write_text(updated(page))
    print(f"{path}: settings table rewritten ({len(Settings.model_fields)} settings)")
    return 0
