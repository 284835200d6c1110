"""The layers depend one way: config/errors/worker <- domain <- hsm, db <- services <- api <- serving <- cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "keymanager"

# For each layer, the keymanager layers and third-party packages it may import.
ALLOWED = {
    "config": ({"config"}, set()),
    "errors": (set(), set()),
    "worker": (set(), set()),
    "domain": ({"domain", "errors", "config"}, set()),
    "hsm": ({"hsm", "domain", "errors", "config", "worker"}, {"pkcs11"}),
    "db": ({"db", "domain", "errors", "config"}, {"sqlalchemy", "alembic"}),
    "services": ({"services", "domain", "errors", "config", "worker", "hsm", "db"}, set()),
    "api": ({"api", "services", "domain", "errors", "config"}, {"fastapi", "starlette"}),
    "serving": ({"serving", "api", "config"}, {"uvicorn", "uvloop"}),
    "cli": ({"cli", "serving", "api", "services", "domain", "errors", "config", "worker", "hsm", "db"}, set()),
}
RESTRICTED = {
    "pkcs11": "hsm",
    "sqlalchemy": "db",
    "alembic": "db",
    "fastapi": "api",
    "starlette": "api",
    "uvicorn": "serving",
    "uvloop": "serving",
}
SHARED = {("serving", "fastapi")}
"""Exceptions to RESTRICTED: serving's app factory returns the API's FastAPI app."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _layer(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 else relative.stem


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if _layer(p) in ALLOWED)


def test_every_module_belongs_to_a_layer() -> None:
    stray = [p for p in PACKAGE.rglob("*.py") if _layer(p) not in ALLOWED and p.name != "__init__.py"]
    assert stray == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path: Path) -> None:
    layer = _layer(path)
    own_layers, _ = ALLOWED[layer]
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "keymanager":
            parts = name.split(".")
            if len(parts) > 1:
                assert parts[1] in own_layers | {"__init__"}, f"{path.name} ({layer}) imports {name}"
        elif top in RESTRICTED:
            assert RESTRICTED[top] == layer or (layer, top) in SHARED, (
                f"{path.name} ({layer}) imports {top}, reserved to {RESTRICTED[top]}"
            )
