"""The bench's modules import one another without a circle, function-level imports included (issue 34,
item 7: a circle means two modules that cannot be understood, or changed, one without the other)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def imports_of(source: str) -> set[str]:
    """The ``bench`` modules a module's source imports, at any depth of it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "bench":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bench."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("bench."))
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle of ``graph`` once, as the path from its smallest name back to it."""
    found: list[list[str]] = []

    def walk(start: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], set())):
            if nxt == start:
                found.append([*path, start])
            elif nxt > start and nxt not in path:
                walk(start, [*path, nxt])

    for name in sorted(graph):
        walk(name, [name])
    return found


def test_no_module_of_the_bench_takes_part_in_an_import_circle() -> None:
    modules = {path.stem: path for path in BENCH.glob("*.py")}
    graph = {name: imports_of(path.read_text()) & (modules.keys() - {name}) for name, path in modules.items()}
    assert circles(graph) == []


def test_a_circle_through_a_function_level_import_is_found() -> None:
    graph = {
        "cli": imports_of("def parser():\n    from bench import compare\n"),
        "compare": imports_of("from bench.cli import parse_size\n"),
        "tables": imports_of("import bench.report\n"),
        "report": set(),
    }
    assert circles(graph) == [["cli", "compare", "cli"]]
