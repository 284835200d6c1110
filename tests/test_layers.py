"""The layers depend one way: config/errors/worker/orphans <- domain <- hsm, db <- services <- api <- doors
<- serving <- cli; the doors are plugged in only by the wiring (:data:`PLUGS_IN_DOORS`)."""

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
    "orphans": (set(), set()),
    "domain": ({"domain", "errors", "config"}, set()),
    "hsm": ({"hsm", "domain", "errors", "config", "worker", "orphans"}, {"pkcs11"}),
    "db": ({"db", "domain", "errors", "config"}, {"sqlalchemy", "alembic"}),
    "services": ({"services", "domain", "errors", "config", "worker", "hsm", "db"}, set()),
    "api": ({"api", "services", "domain", "errors", "config"}, {"fastapi", "starlette"}),
    "doors": ({"doors", "api", "services", "domain", "errors", "config", "hsm", "db"}, {"starlette"}),
    "serving": ({"serving", "api", "doors", "config", "orphans"}, {"uvicorn", "uvloop"}),
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
SHARED = {("doors", "starlette")}
"""Exceptions to RESTRICTED: a door is an ASGI application of its own (``starlette.types`` only; serving's
app factory returns the API's gateway, not FastAPI's app)."""
PLUGS_IN_DOORS = {PACKAGE / "services" / "container.py", PACKAGE / "api" / "app.py"}
"""The wiring, the only modules below the doors that name them: the container builds each door's
services, the app gives each door's entry to the gateway."""


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
            if len(parts) > 1 and not (parts[1] == "doors" and path in PLUGS_IN_DOORS):
                assert parts[1] in own_layers | {"__init__"}, f"{path.name} ({layer}) imports {name}"
        elif top in RESTRICTED:
            assert RESTRICTED[top] == layer or (layer, top) in SHARED, (
                f"{path.name} ({layer}) imports {top}, reserved to {RESTRICTED[top]}"
            )


# The API speaks HTTP: it uses services, never the parts they are built on, even through the container.
BEHIND_SERVICES = {"store", "hsm", "audit_records", "audit_store"}
"""Members of ``Services`` (and of anything else named like it) that only services may use."""
WIRING = {"observer", "on_timeout"}
"""Callbacks of lower layers, set only through ``Services.observe``."""


def reaches_through(source: str) -> list[str]:
    """Each place in ``source`` that uses a part behind the services or sets a part's callback."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in BEHIND_SERVICES:
            holder = ast.unparse(node.value).removesuffix("()").rsplit(".", 1)[-1]
            if holder in {"svc", "services"}:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        targets = node.targets if isinstance(node, ast.Assign) else []
        found += [
            f"line {t.lineno}: {ast.unparse(t)} =" for t in targets if isinstance(t, ast.Attribute) and t.attr in WIRING
        ]
    return found


API_MODULES = [p for p in MODULES if _layer(p) == "api" or (_layer(p) == "doors" and p.name == "door.py")]
"""The API's modules and each door's HTTP entry."""


@pytest.mark.parametrize("path", API_MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_api_reaches_no_store_or_hsm_through_the_container(path: Path) -> None:
    assert reaches_through(path.read_text()) == []


def test_reaching_through_the_container_is_caught() -> None:
    source = """
def route(svc, request):
    svc.store.ping()
    request.app.state.services.hsm.ping()
    self.services().audit_records.query(None)
    svc.hsm.observer = print
    svc.crypto.encrypt()
"""
    assert sorted(place.split(":")[0] for place in reaches_through(source)) == [
        "line 3",
        "line 4",
        "line 5",
        "line 6",
        "line 6",
    ]


# One crypto path (issue 34, item 2): a door's Encrypt and Decrypt translate into the crypto
# service's operations (``services/raw_cipher.py`` for the raw modes); they never call the HSM.
DOOR_CRYPTO = [PACKAGE / "doors" / "kmip" / "crypto.py", PACKAGE / "doors" / "xks" / "operations.py"]


@pytest.mark.parametrize("path", DOOR_CRYPTO, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_doors_crypto_reaches_no_hsm(path: Path) -> None:
    assert sorted(n for n in _imports(path) if n.startswith("keymanager.hsm")) == []


# One codec per protocol library (issue 34, item 5): the KMIP door's operations read and answer the
# door's own types (``doors/kmip/requests.py``, named by ``doors/kmip/spec/``); only its codec
# (``doors/kmip/codec/``) imports PyKMIP (``kmip``), to read and write them.
KMIP_CODEC = PACKAGE / "doors" / "kmip" / "codec"


def _imports_pykmip(path: Path) -> bool:
    return any(name.split(".")[0] == "kmip" for name in _imports(path))


def test_pykmip_is_imported_only_by_the_kmip_codec() -> None:
    outside = [
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if KMIP_CODEC not in p.parents and _imports_pykmip(p)
    ]
    assert outside == []


def test_the_kmip_codec_is_where_pykmip_is() -> None:
    assert any(_imports_pykmip(p) for p in KMIP_CODEC.rglob("*.py"))
