"""Every reason a connection is refused for, anywhere in the package, is one the refusal log knows
(``serving/refusals.py`` ``REASONS``): ``kmip_header`` and ``kmip_timeout`` were not, so their
first refusal raised ``KeyError`` and a summary holding one stopped the other addresses' lines
(issue 41, item 6)."""

from __future__ import annotations

import ast
import asyncio
import logging
from pathlib import Path

import pytest

import keymanager
from keymanager.serving.refusals import REASONS, ConnectionRefusals

PACKAGE = Path(keymanager.__file__).parent


def literal_reasons(node: ast.expr, tables: dict[str, set[str]], function: str) -> set[str]:
    """The reasons an argument expression can be: literals, either branch of a conditional, the values
    of a module's reason table (``_REFUSALS[status]``); a helper's own parameter is read at its calls."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return literal_reasons(node.body, tables, function) | literal_reasons(node.orelse, tables, function)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in tables:
        return tables[node.value.id]
    if isinstance(node, ast.Name) and node.id == "reason" and function == "_refuse":
        return set()
    raise AssertionError(f"a refusal reason this test cannot read: {ast.unparse(node)} in {function}")


def reasons_used() -> dict[str, set[str]]:
    """Per module, every reason passed to ``….refused(address, reason)`` or ``_refuse(reason)``."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        tables = {
            target.id: {v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            for target in node.targets
            if isinstance(target, ast.Name) and "REFUSAL" in target.id
        }
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for call in ast.walk(function):
                if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute | ast.Name):
                    continue
                name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
                if name == "refused" and len(call.args) == 2:  # ConnectionRefusals.refused(address, reason)
                    argument = call.args[1]
                elif name == "_refuse" and len(call.args) == 1:
                    argument = call.args[0]
                else:
                    continue
                module = str(path.relative_to(PACKAGE))
                found.setdefault(module, set()).update(literal_reasons(argument, tables, function.name))
    return found


def test_every_reason_used_anywhere_is_a_known_one() -> None:
    used = reasons_used()
    assert {"serving/kmip.py", "serving/front.py", "serving/protocol.py"} <= set(used), used
    every = set().union(*used.values())
    assert {"kmip_header", "kmip_timeout", "tls", "bad_request", "proxy_header"} <= every
    unknown = {module: reasons - set(REASONS) for module, reasons in used.items() if reasons - set(REASONS)}
    assert not unknown, unknown


def test_an_unknown_reason_is_still_counted_and_the_other_addresses_logged(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    counted: list[str] = []
    refusals = ConnectionRefusals(interval=60, clock=lambda: now[0])
    refusals.observer = counted.append

    async def refuse() -> None:
        for reason in ("kmip_timeout", "kmip_header", "no_such_reason"):
            refusals.refused("203.0.113.50", reason)
            refusals.refused("203.0.113.51", "kmip_timeout")
        refusals.flush(everything=True)

    with caplog.at_level(logging.WARNING, logger="keymanager.serving.refusals"):
        asyncio.run(refuse())
    lines = [record.getMessage() for record in caplog.records]
    assert len(counted) == 6
    assert any("203.0.113.51" in line and "more connections" in line for line in lines), lines
    assert any("no_such_reason" in line for line in lines), lines
    assert any(REASONS["kmip_header"] in line for line in lines), lines
