"""pytest plugin for CI: write what collection found to a JSON file, for ``check_report.py``.

Loaded only by ``.ci/run``'s own collection run (``-p ci_collection --ci-collection FILE``),
never by the test command, so nothing the test command is given can change it. The file holds
every collected test's node id, file, marker names and its name in a JUnit report (pytest's
own mapping, so the two always agree), and the tests a hook deselected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _pytest.junitxml import mangle_test_address

_deselected: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--ci-collection", metavar="FILE", help="write the collected tests to FILE (JSON)")


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected.extend(item.nodeid for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    target = session.config.getoption("--ci-collection")
    if not target:
        return
    items = [
        {
            "nodeid": item.nodeid,
            "file": item.nodeid.split("::", 1)[0],
            "markers": sorted({marker.name for marker in item.iter_markers()}),
            "junit": _junit_name(item.nodeid),
        }
        for item in session.items
    ]
    document = {"items": items, "deselected": _deselected}
    Path(target).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def _junit_name(nodeid: str) -> str:
    """``classname::name`` as pytest's JUnit report writes this test."""
    names = mangle_test_address(nodeid)
    return ".".join(names[:-1]) + "::" + names[-1]
