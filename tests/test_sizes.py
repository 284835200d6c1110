"""A module of the service holds at most 400 lines, a function at most 60: a module has one reason
to change, a function fits on a screen. Ruff's C901, PLR0913 and PLR0915 (``pyproject.toml``) keep
the functions simple; these tests keep them, and the modules, short."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "keymanager"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MODULES = sorted(PACKAGE.rglob("*.py"))


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name (line N): M lines`` for each function or method of ``source`` longer than ``limit``
    lines, from its ``def`` to its last line (a nested function counts in its own and in its parent's)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{node.name} (line {node.lineno}): {lines} lines")
    return found


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_no_module_is_over_400_lines() -> None:
    lines = {_name(path): len(path.read_text().splitlines()) for path in MODULES}
    offenders = [f"{name}: {n} lines" for name, n in lines.items() if n > MAX_MODULE_LINES]
    assert not offenders, "modules over 400 lines:\n" + "\n".join(offenders)


def test_no_function_is_over_60_lines() -> None:
    offenders = [f"{_name(path)}: {found}" for path in MODULES for found in long_functions(path.read_text())]
    assert not offenders, "functions over 60 lines:\n" + "\n".join(offenders)


def test_a_long_function_is_caught() -> None:
    source = """
def short():
    return 1


class C:
    async def longer(self):
        def inner():
            return 2

        return inner()
"""
    assert long_functions(source, limit=3) == ["longer (line 7): 5 lines"]
