"""Servers shared by the tests of one process, and the pytest-xdist groups of the tests sharing one.

:class:`ServerPool` (the session fixture ``server_pool`` of ``tests/conftest.py``) starts at most one
real ``keymanager init`` + ``keymanager serve`` (:func:`tests.e2e.conftest.running_server`) per
distinct settings in a test process, when a test first asks for those settings, and stops them all
when the process ends. Tests asking for equal settings get the same server, its token and its
database: such tests make their own principals and keys with names no other test uses.

Under pytest-xdist every worker is a test process with its own pool (its own SoftHSM token
directory, var dirs, ports, PostgreSQL databases: nothing a worker makes is another's).
:func:`server_groups` keeps every test that shares a server on one worker, so each shared server
still starts once in the run (``--dist loadgroup``): a test's group is found from the fixtures it
uses. A fixture of a wider scope than the function that asks for ``server_pool`` or
``tmp_path_factory`` (it starts a server, or makes something else that outlives the test) is a
*shared root*, unless it is one of :data:`PER_PROCESS` (cheap, made by each process anyway); tests
sharing a root are in one group, and so are the roots one test uses together.

A test that must own its server (it injects faults, restarts it, reads its log or counters alone)
starts one with :func:`running_server` inside the test and carries ``@pytest.mark.own_server``;
it belongs to no group and runs wherever a worker is free.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the grouping below needs none of the server's modules (tests/test_xdist_groups.py)
    from tests.e2e.conftest import Server

SHARING = frozenset({"server_pool", "tmp_path_factory"})
"""Fixtures whose users of a wider scope are shared roots (:func:`server_groups`)."""
PER_PROCESS = frozenset({"server_pool", "migrated_sqlite", "postgres_template"})
"""Fixtures every test process makes for itself, cheaply: no reason to keep their users together."""


class ServerPool:
    """One running server per distinct settings, for the tests of this process (see the module docstring)."""

    def __init__(self, homes: pytest.TempPathFactory) -> None:
        self._homes = homes
        self._servers: dict[tuple[object, ...], Server] = {}
        self._stack = contextlib.ExitStack()

    def get(self, *, workers: int | None = 2, client_ca: bool = True, kmip: bool = False, **settings: str) -> Server:
        """The server of these settings (``running_server``'s arguments; ``kmip``: KMIP on a free port,
        ``KM_KMIP_PORT`` in its ``env``), started on first use."""
        from tests.e2e.conftest import free_port, running_server

        key = (workers, client_ca, kmip, *sorted(settings.items()))
        if key not in self._servers:
            if kmip:
                settings["KM_KMIP_PORT"] = str(free_port())
            home = self._homes.mktemp("pooled")
            self._servers[key] = self._stack.enter_context(
                running_server(home, workers=workers, client_ca=client_ca, **settings)
            )
        return self._servers[key]

    def close(self) -> None:
        """Stop every server of the pool."""
        self._stack.close()


def _root_id(fixturedef: pytest.FixtureDef[object]) -> str:
    """A group name for a shared root: its name, and its module's where a test module defines it
    (no ``::``, ``/``, ``@`` or ``[``: the name ends up in the test's id and its JUnit report)."""
    module = fixturedef.baseid.rpartition("/")[2].removesuffix(".py")
    return f"{module}.{fixturedef.argname}" if module.startswith("test_") else fixturedef.argname


def _roots(item: pytest.Item) -> set[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    roots = set()
    for name in item.fixturenames:  # type: ignore[attr-defined]
        definitions = info.name2fixturedefs.get(name)
        if not definitions or name in PER_PROCESS:
            continue
        fixturedef = definitions[-1]
        if fixturedef.scope != "function" and SHARING & set(fixturedef.argnames):
            roots.add(_root_id(fixturedef))
    return roots


def server_groups(items: Iterable[pytest.Item]) -> dict[str, str]:
    """The group of each test (by node id) that uses a shared root; tests without one are left out.

    Roots used together by a test end up in one group (connected components), named after the
    smallest root id in it, so every worker, collecting the same tests, names the groups alike.
    """
    parent: dict[str, str] = {}

    def find(root: str) -> str:
        while parent.setdefault(root, root) != root:
            parent[root] = parent[parent[root]]
            root = parent[root]
        return root

    used = {item.nodeid: _roots(item) for item in items}
    for roots in used.values():
        ordered = sorted(roots)
        for other in ordered[1:]:
            a, b = find(ordered[0]), find(other)
            parent[max(a, b)] = min(a, b)
    return {nodeid: find(min(roots)) for nodeid, roots in used.items() if roots}


def mark_groups(items: list[pytest.Item]) -> None:
    """Mark every test that uses a shared root with its ``xdist_group`` (:func:`server_groups`)."""
    groups = server_groups(items)
    for item in items:
        group = groups.get(item.nodeid)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
