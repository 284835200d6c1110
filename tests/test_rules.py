"""One set of rules behind every door: no door decides a role, every action is in the services'
table of rights, and every audit record is written through the one place that decides it.

Beside ``tests/test_layers.py``: where that test holds the arrows between layers, this one
holds the rules a door must leave to the services (``services/authorization.py``,
``services/audit_log.py``).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute

from keymanager.api.app import ROUTERS
from keymanager.api.audit_trail import AuditContext
from keymanager.api.deps import caller
from keymanager.api.front_door import PUBLIC_PATHS
from keymanager.doors.kms.door import KNOWN_UNSUPPORTED
from keymanager.services.authorization import RIGHTS, audited
from keymanager.services.container import Services

PACKAGE = Path(__file__).resolve().parents[1] / "keymanager"


def opens_the_pipeline(source: str) -> bool:
    """``source`` settles an answer with the audit log (``….settle(…)``): what every door does once
    it has a caller and an answer (REST in ``api/audit_trail.py``, each other door in its module)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "settle"
        for n in ast.walk(ast.parse(source))
    )


DOORS = sorted([*(PACKAGE / "api").rglob("*.py"), *(PACKAGE / "doors").rglob("*.py")])
"""The doors' own code: the REST API's layer and the doors' room (no door named here; a new one is held
to these rules by living in ``doors/``, and one that opened the pipeline anywhere else would fail
:func:`test_the_doors_are_discovered`)."""
GUARDS = {"require_role", "require_admin", "ADMIN", "READER"}
"""The names the role guards of the doors went by."""


def _is_role(node: ast.expr) -> bool:
    """``node`` reads a principal's role or names a role (``x.role``, ``role``, ``Role.ADMIN``, or a
    tuple of them)."""
    if isinstance(node, ast.Name):
        return node.id == "role"
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_role(e) for e in node.elts)
    if not isinstance(node, ast.Attribute):
        return False
    return node.attr == "role" or (isinstance(node.value, ast.Name) and node.value.id == "Role")


def role_decisions(source: str, *, guards: bool = True) -> list[str]:
    """Each place in ``source`` that compares a role, or (``guards``) names a role guard."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_is_role(n) for n in [node.left, *node.comparators]):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif not guards:
            continue
        elif isinstance(node, ast.Name) and node.id in GUARDS:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name in GUARDS]
    return found


def test_the_doors_are_discovered() -> None:
    """Every module opening the pipeline is the API layer's or a door's, and ``services/`` holds no
    package (the core's modules are files; a door's translation is in ``doors/``): nothing a door does
    escapes the scans below."""
    openers = {p.relative_to(PACKAGE).parts[0] for p in PACKAGE.rglob("*.py") if opens_the_pipeline(p.read_text())}
    assert openers == {"api", "doors"}
    assert list((PACKAGE / "services").glob("*/__init__.py")) == []  # a door's translation is in doors/
    assert opens_the_pipeline("settled = await svc.audit_log.settle(action, status=200, entry=entry)")


@pytest.mark.parametrize("path", DOORS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_door_decides_a_role(path: Path) -> None:
    assert role_decisions(path.read_text()) == []


NOT_PRINCIPAL_ROLES = {
    "hsm/templates.py": "an HSM object's role (ObjectRole: which object of a key version), not a principal's",
    "db/migrations": "the schema's history, which cannot ask the services",
}
"""Where ``role`` means something else, or code that runs as it was written once."""


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_but_the_rights_table_decides_a_role(path: Path) -> None:
    """The core as well as the doors: who sees every key, whom a policy may name, who may be given
    ``create_keys``, which doors a role passes, whom an approval rule may name — each is a row of
    ``services/authorization.py``, asked with ``holds``, ``grantable`` or ``admits``."""
    relative = str(path.relative_to(PACKAGE))
    if relative == "services/authorization.py" or any(relative.startswith(p) for p in NOT_PRINCIPAL_ROLES):
        return
    assert role_decisions(path.read_text(), guards=False) == []


def test_a_role_decided_by_the_core_is_caught() -> None:
    source = """
def create(role, create_keys):
    if create_keys and role in (Role.XKS, Role.AUDITOR):
        raise InvalidRequest()
    if not holds(role, Right.MANAGE) and Role.ADMIN != role:
        pass
"""
    assert sorted({place.split(":")[0] for place in role_decisions(source, guards=False)}) == ["line 3", "line 5"]


def test_a_role_decided_by_a_door_is_caught() -> None:
    source = """
from keymanager.domain.models import Role
from keymanager.api.deps import ADMIN

@router.post("", dependencies=[ADMIN])
def route(principal):
    if principal.role is not Role.ADMIN:
        raise Forbidden()
    if Role.APP in roles or body.role == "admin":
        pass
    made = create(body.name, body.role)
"""
    assert sorted({place.split(":")[0] for place in role_decisions(source)}) == ["line 3", "line 5", "line 7", "line 9"]


def _routes() -> list[APIRoute]:
    """Every route of the REST API: the routers ``create_app`` includes (``api/app.py`` ``ROUTERS``),
    so a router added there is held to these rules without a line here."""
    return [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]


def _authenticates(route: APIRoute) -> bool:
    """The route's caller is authenticated (and so authorized): by a dependency, or by its endpoint."""
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        if dependant.call is caller:
            return True
        pending += dependant.dependencies
    return _runs_authenticated(route.endpoint)


def _runs_authenticated(function: Any, depth: int = 2) -> bool:
    """``function`` calls ``run_authenticated``, itself or through a function of its module."""
    source = inspect.getsource(function)
    if "run_authenticated(" in source:
        return True
    module = inspect.getmodule(function)
    called = {
        n.func.id
        for n in ast.walk(ast.parse(source.lstrip()))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    helpers = [getattr(module, name) for name in called if inspect.isfunction(getattr(module, name, None))]
    return depth > 0 and any(_runs_authenticated(h, depth - 1) for h in helpers if h is not function)


@pytest.mark.parametrize("route", _routes(), ids=lambda r: f"{sorted(r.methods)[0]} {r.path}")
def test_every_route_authorizes_its_action_with_the_services(route: APIRoute) -> None:
    if route.path in PUBLIC_PATHS:
        return
    assert _authenticates(route)
    action = AuditContext(request_id="", client=None, scope={"endpoint": route.endpoint}).action
    assert action in RIGHTS


def test_every_kms_operation_served_has_its_right(services: Services) -> None:
    served = {*services.kms_crypto.operations, *services.kms_keys.reads, *services.kms_keys.changes}
    assert {f"kms.{operation}" for operation in served} <= RIGHTS.keys()
    assert not {f"kms.{operation}" for operation in KNOWN_UNSUPPORTED} & RIGHTS.keys()


def awrite_callers(source: str) -> list[str]:
    """Each function in ``source`` that calls ``….awrite(…)``, by name."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            calls = [n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
            found += [
                function.name for call in calls if isinstance(call.func, ast.Attribute) and call.func.attr == "awrite"
            ]
    return found


def test_every_audit_record_of_a_request_is_written_through_the_audit_log() -> None:
    callers = {
        f"{path.relative_to(PACKAGE)}:{name}"
        for path in PACKAGE.rglob("*.py")
        for name in awrite_callers(path.read_text())
    }
    assert callers == {"services/audit_log.py:_write"}


def test_a_second_writer_is_caught() -> None:
    source = """
async def write_summary(services, entry):
    await services.audit_writer.awrite(entry)
"""
    assert awrite_callers(source) == ["write_summary"]


# Whether a request is audited is the rights table's say (``authorization.UNAUDITED``), not a door's:
# a door gives ``AuditLog.settle`` its action and facts, and asks nothing of ``authorization.audited``.
def audit_decisions(source: str) -> list[str]:
    """Each ``audited=`` argument in ``source`` and each import of ``authorization.audited``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "audited":
            found.append(f"line {node.value.lineno}: audited={ast.unparse(node.value)}")
        elif isinstance(node, ast.ImportFrom) and node.module == "keymanager.services.authorization":
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name == "audited"]
    return found


@pytest.mark.parametrize("path", DOORS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_door_decides_whether_a_request_is_audited(path: Path) -> None:
    assert audit_decisions(path.read_text()) == []


def test_an_audit_decision_of_a_door_is_caught() -> None:
    source = """
from keymanager.services.authorization import audited, authorize
owed = svc.audit_log.owed(audited=refusal is not None or name not in ("Query",), authenticated=True)
settled = await svc.audit_log.settle(call.action, authenticated=True, success_taken=False, status=200, entry=e)
"""
    assert audit_decisions(source) == [
        "line 2: imports audited",
        "line 3: audited=refusal is not None or name not in ('Query',)",
    ]


@pytest.mark.parametrize("route", _routes(), ids=lambda r: f"{sorted(r.methods)[0]} {r.path}")
def test_a_routes_declaration_agrees_with_the_table(route: APIRoute) -> None:
    """``@audited`` names an audited action, ``@unaudited`` one of ``UNAUDITED``: a reader of the
    route is not misled about what the table decides."""
    declared = getattr(route.endpoint, "__km_audit_action__", None)
    unaudited = getattr(route.endpoint, "__km_unaudited_action__", None)
    if declared is not None:
        assert audited(declared), declared
    if unaudited is not None:
        assert not audited(unaudited), unaudited


# Admission by the failed-authentication throttle is written once (``api/front_door.py`` ``Admission``).
def throttle_admissions(source: str) -> list[str]:
    """Each call in ``source`` of the throttle's admission (``….retry_after(…)``, ``….refused(…)``,
    ``….failed(…)`` on a throttle)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("retry_after", "refused", "failed")
        ) and "throttle" in ast.unparse(node.func.value):
            found.append((node.lineno, f"line {node.lineno}: {ast.unparse(node.func)}"))
    return [text for _, text in sorted(found)]


@pytest.mark.parametrize("path", DOORS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_door_admits_through_the_throttle_itself(path: Path) -> None:
    found = throttle_admissions(path.read_text())
    if path == PACKAGE / "api" / "front_door.py":  # the one place
        assert len(found) == 3, found
    else:
        assert found == []


def test_a_doors_own_admission_is_caught() -> None:
    source = """
wait = self.throttle.retry_after(address)
if wait is not None:
    await summarise(svc, self.throttle.refused(address), scope, 429)
summary = self.throttle.failed(client)
"""
    assert throttle_admissions(source) == [
        "line 2: self.throttle.retry_after",
        "line 4: self.throttle.refused",
        "line 5: self.throttle.failed",
    ]
