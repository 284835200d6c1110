"""The README's first steps, as written, against a real server: the SDK's and kmctl's first encrypt
and the AWS CLI's; and every marked block of the README and of ``docs/`` is one a test runs."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.e2e.conftest import Server
from tests.e2e.test_server import DOC_PAGES, ROOT, doc_block, run_readme_block

RUN_BY_TESTS = {
    "walkthrough": "tests/e2e/test_server.py",
    "lifecycle": "tests/e2e/test_server.py",
    "blind-index": "tests/e2e/test_server.py",
    "stream": "tests/e2e/test_server.py",
    "tokens": "tests/e2e/test_tokens.py",
    "import": "tests/e2e/test_tokens.py",
    "kms-example": "tests/kms_api/test_readme.py",
    "sdk-first": "tests/e2e/test_readme.py",
    "kmctl-first": "tests/e2e/test_readme.py",
    "aws-cli": "tests/e2e/test_readme.py",
    "dual-control": "tests/e2e/test_server.py",
    "kmip-deselected": "tests/kmip/test_pykmip_suite.py",  # a table: the suite's deselections, checked
}
"""Every marked block and the test file that runs it."""


def test_every_marked_block_is_run_by_a_test() -> None:
    names = {name for page in DOC_PAGES for name in re.findall(r"<!-- ([a-z-]+):start -->", page.read_text())}
    assert names - {"settings"} == set(RUN_BY_TESTS)  # settings: the generated table of docs/configuration.md
    for name, test in RUN_BY_TESTS.items():
        text = (ROOT / test).read_text()
        assert f'"{name}"' in text or f"<!-- {name}:start -->" in text, (name, test)


def test_every_command_block_of_the_readme_is_marked_or_is_the_setup() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"(<!-- [^\n]*-->\n)?```(bash|python|sh)\n", readme)
    unmarked = [language for marker, language in blocks if not marker]
    assert unmarked == []
    setup = [marker for marker, _ in blocks if marker.startswith("<!-- setup")]
    assert len(setup) == 1  # make run / make test: the tests start their own server
    assert len(readme.splitlines()) <= 250


def test_the_readme_sdk_example_runs_as_written(server: Server) -> None:
    checkout = server.var_dir.parent
    env = {**server.env, "KM": server.url, "CA": str(server.ca)}
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", doc_block("sdk-first")],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        ciphertext, plaintext = done.stdout.split()
        assert ciphertext.startswith("km:1:") and plaintext == "4111111111111111"


def test_the_readme_kmctl_example_runs_as_written(server: Server) -> None:
    out = run_readme_block(server, "kmctl-first").splitlines()
    assert ["name", "admin"] in [line.split() for line in out] and any(line.startswith("kmctl-cards-") for line in out)
    assert any(line.startswith("km:1:") for line in out) and "4111111111111111" in out
    assert re.fullmatch(r"\d+\tkey\.decrypt\tok", out[-3]), out


def test_the_readme_aws_cli_example_runs_as_written(server: Server) -> None:
    assert run_readme_block(server, "aws-cli").splitlines() == ["4111111111111111"]
