"""The tests sharing a server run on one pytest-xdist worker (``--dist loadgroup``), as ``make test`` runs them.

A small suite of its own, in a subprocess: tests of two modules sharing a session fixture made with
``tmp_path_factory`` (a shared root, ``tests/support/server_pool.py``) and tests using nothing
shared, grouped by this project's hook and run on two workers. Every shared test must carry its
group in its id and run on the same worker as the others; the rest must carry none. This fails when
pytest and pytest-xdist stop agreeing on how a group reaches the scheduler (pytest-xdist#1386:
pytest 9.2 with pytest-xdist 3.8 groups nothing, silently), and when the hook stops finding roots.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFTEST = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import pytest
from tests.support.server_pool import mark_groups

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    mark_groups(items)

@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    return tmp_path_factory.mktemp("shared")
"""
MODULE = """
import pytest

@pytest.mark.parametrize("n", range(4))
def test_shared(shared, n):
    assert shared.is_dir()

@pytest.mark.parametrize("n", range(4))
def test_alone(tmp_path, n):
    assert tmp_path.is_dir()
"""


def test_tests_sharing_a_root_run_together_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text(MODULE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = re.findall(r"^\[(gw\d)\] \[\s*\d+%\] PASSED (\S+)", done.stdout, re.MULTILINE)
    assert len(ran) == 16, done.stdout[-3000:]
    shared = [(worker, test) for worker, test in ran if "test_shared" in test]
    assert all(test.endswith("@shared") for _, test in shared), shared
    assert len({worker for worker, _ in shared}) == 1, shared
    assert not any("@" in test for _, test in ran if "test_alone" in test), ran
