"""CI guard: fail unless the test commands ran every collected test, each passed, and every area ran enough.

Usage: check_report.py JUNIT_XML... --collection COLLECTION_JSON [--test-exit-status N]...
       check_report.py JUNIT_XML --at-least N [--test-exit-status N]

``COLLECTION_JSON`` comes from ``.ci/run``'s own ``pytest --collect-only`` of ``tests/`` (plugin
``ci_collection``, no options from the environment or the configuration's ``addopts``), so it
says what a full run must execute; the ``JUNIT_XML`` reports are what the test commands executed
(``make test`` and ``make test-interop``: together they must be the whole collection). The run fails on

- a test collected but not executed by any of the commands (deselected with ``-m``/``-k``, a
  narrower path, ``-x``, ...), or executed but not collected;
- any skip, xfail or xpass, any failure or error, and a run that executed no test (pytest exit 5);
- a test carrying a ``skip``, ``skipif`` or ``xfail`` marker, or a hook deselecting tests;
- fewer executed tests in an area than ``MINIMUMS`` requires. Areas are told apart by file and by
  marker (the PostgreSQL parametrisation carries ``pytest.mark.postgres``), never by test names.

A test's name in a report of ``pytest-xdist --dist loadgroup`` ends in ``@<group>`` (the group of
tests sharing its server); the group is not part of the test's name here.

The second form checks a run of a subset (the HSM subset on a second PKCS#11 token): no
collection to compare with; it fails on any skip, xfail, failure or error, and on fewer than
``N`` passed tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Item = dict[str, Any]


def _under(folder: str) -> Callable[[Item], bool]:
    return lambda item: str(item["file"]).startswith(folder + "/")


def _file(path: str) -> Callable[[Item], bool]:
    return lambda item: item["file"] == path


def _postgres_under(folder: str) -> Callable[[Item], bool]:
    return lambda item: _under(folder)(item) and "postgres" in item["markers"]


MINIMUMS: list[tuple[str, int, Callable[[Item], bool]]] = [
    # area                               executed at least    which tests count (figures of 2026-12-02, sixth session)
    ("every test", 2700, lambda item: True),  # 2,811
    ("tests/hsm (SoftHSM)", 170, _under("tests/hsm")),  # 181 (41 of them key pairs)
    ("tests/db on PostgreSQL", 80, _postgres_under("tests/db")),  # 86 (the parametrisation marked postgres)
    ("tests/e2e", 60, _under("tests/e2e")),  # 68 (40 of them asymmetric keys over TLS, openssl too)
    ("tests/replicas", 17, _under("tests/replicas")),  # 19: chains per writer, faults, PgBouncer
    ("tests/replicas/test_faults.py", 4, _file("tests/replicas/test_faults.py")),  # 4
    ("tests/replicas/test_pgbouncer.py", 1, _file("tests/replicas/test_pgbouncer.py")),  # 1
    ("tests/serving", 50, _under("tests/serving")),  # 54: workers, CPU detection and pinning on real servers
    ("tests/security", 120, _under("tests/security")),  # 128: one file per attack of the hardening issues
    ("tests/security/test_fuzz.py", 6, _file("tests/security/test_fuzz.py")),  # 6: four roles, coverage, 405s
    ("tests/kms_api (boto3, AWS CLI, Encryption SDK)", 165, _under("tests/kms_api")),  # 173
    ("tests/kms_api/test_asymmetric.py (boto3)", 55, _file("tests/kms_api/test_asymmetric.py")),  # 58
    ("tests/kms_api/test_encryption_sdk_keyrings.py", 2, _file("tests/kms_api/test_encryption_sdk_keyrings.py")),  # 2
    ("tests/sdk/test_asymmetric.py (real service)", 20, _file("tests/sdk/test_asymmetric.py")),  # 21
    ("tests/xks (botocore and curl signers)", 70, _under("tests/xks")),  # 77 (the conformance rules too)
    ("tests/kmip (PyKMIP, libmongocrypt)", 310, _under("tests/kmip")),  # 320 (236 of them the codec's equality)
    ("tests/kmip/test_one_mode.py", 9, _file("tests/kmip/test_one_mode.py")),  # 9: issue 41 items 1 and 5, per spec
    ("tests/transit (hvac, sops, confluent-kafka)", 60, _under("tests/transit")),  # 63
    ("tests/ui (Chromium, Playwright)", 17, _under("tests/ui")),  # 17
    # PyKMIP's own integration suite (it asserts its own counts inside) and libmongocrypt's round trips.
    ("tests/kmip/test_pykmip_suite.py", 2, _file("tests/kmip/test_pykmip_suite.py")),  # 2
    ("tests/kmip/test_mongocrypt.py", 3, _file("tests/kmip/test_mongocrypt.py")),  # 3
    # The Encryption SDK's own integration suite (one test; it asserts its 49 passed inside) and its fetch.
    ("tests/kms_api/test_esdk_suite.py", 3, _file("tests/kms_api/test_esdk_suite.py")),  # 3
]
FORBIDDEN_MARKERS = {"skip", "skipif", "xfail"}
SHOWN = 10
"""Names listed per problem; the rest are counted."""


@dataclass(frozen=True)
class Outcome:
    kind: str  # "passed", "failed", "skipped", "xfail"
    detail: str


def without_group(name: str) -> str:
    """A test's name less the ``@<group>`` that ``--dist loadgroup`` appends (not one inside ``[...]``)."""
    at = name.rfind("@")
    return name[:at] if at > name.rfind("]") else name


def junit_outcomes(reports: list[Path]) -> tuple[dict[str, Outcome], list[str]]:
    """Each test case of the JUnit reports by ``classname::name`` (a case reported twice keeps its
    worst outcome), and a problem for each report that cannot be read."""
    outcomes: dict[str, Outcome] = {}
    unread: list[str] = []
    rank = {"passed": 0, "skipped": 1, "xfail": 1, "failed": 2}
    cases = []
    for report in reports:
        try:
            cases += ET.parse(report).getroot().iter("testcase")  # noqa: S314 (our own runs' reports)
        except (OSError, ET.ParseError) as exc:
            unread.append(f"no JUnit report {report} from its test command ({exc})")
    for case in cases:
        name = f"{case.get('classname')}::{without_group(case.get('name') or '')}"
        outcome = Outcome("passed", "")
        for element in case:
            if element.tag in ("failure", "error"):
                outcome = Outcome("failed", element.get("message") or element.tag)
            elif element.tag == "skipped" and outcome.kind == "passed":
                kind = "xfail" if element.get("type") == "pytest.xfail" else "skipped"
                outcome = Outcome(kind, element.get("message") or "")
        if name not in outcomes or rank[outcome.kind] > rank[outcomes[name].kind]:
            outcomes[name] = outcome
    return outcomes, unread


def listing(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def not_passed(outcomes: dict[str, Outcome], shown_as: Callable[[str], str]) -> list[str]:
    """One problem per kind of outcome other than passed (skipped, xfailed, failed), naming the tests."""
    kinds: dict[str, list[str]] = {}
    for name, outcome in outcomes.items():
        kinds.setdefault(outcome.kind, []).append(name)
    problems = []
    for kind, word in (("skipped", "skipped"), ("xfail", "xfailed"), ("failed", "failed or errored")):
        hit = sorted(shown_as(name) for name in kinds.get(kind, []))
        if hit:
            problems.append(f"{len(hit)} tests {word}: {listing(hit)}")
    return problems


def check_subset(outcomes: dict[str, Outcome], minimum: int) -> tuple[list[str], list[str]]:
    """The summary lines and the problems of a subset's run: every test passed, at least ``minimum``."""
    problems = not_passed(outcomes, str)
    passed = sum(1 for outcome in outcomes.values() if outcome.kind == "passed")
    if passed < minimum:
        problems.append(f"{passed} tests passed, at least {minimum} required")
    return [f"executed {len(outcomes)}, passed {passed} (at least {minimum})"], problems


def check(outcomes: dict[str, Outcome], collection: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The summary lines and the problems (empty when the run is complete and green)."""
    items: list[Item] = collection["items"]
    by_junit = {str(item["junit"]): item for item in items}
    problems: list[str] = []
    if not items:
        problems.append("the collection found no test")
    deselected: list[str] = collection["deselected"]
    if deselected:
        problems.append(f"{len(deselected)} tests deselected by a hook: {listing(deselected)}")
    marked = [
        f"{item['nodeid']} ({', '.join(sorted(found))})"
        for item in items
        if (found := FORBIDDEN_MARKERS & set(item["markers"]))
    ]
    if marked:
        problems.append(f"{len(marked)} tests marked skip/skipif/xfail: {listing(marked)}")
    if not outcomes:
        problems.append("the test commands executed no test (pytest exit 5 or no report)")
    not_run = [item["nodeid"] for name, item in by_junit.items() if name not in outcomes]
    if not_run:
        problems.append(f"{len(not_run)} of {len(items)} collected tests were not executed: {listing(not_run)}")
    unknown = sorted(name for name in outcomes if name not in by_junit)
    if unknown:
        problems.append(f"{len(unknown)} executed tests are not in the collection of tests/: {listing(unknown)}")
    problems += not_passed(outcomes, lambda name: by_junit[name]["nodeid"] if name in by_junit else name)
    passed = [by_junit[name] for name, outcome in outcomes.items() if outcome.kind == "passed" and name in by_junit]
    lines = [f"collected {len(items)}, executed {len(outcomes)}, passed {len(passed)}"]
    for area, minimum, belongs in MINIMUMS:
        count = sum(1 for item in passed if belongs(item))
        lines.append(f"  {area:<30} passed {count:>4}  (at least {minimum})")
        if count < minimum:
            problems.append(f"{area}: {count} passed, at least {minimum} required")
    return lines, problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, nargs="+")
    parser.add_argument("--collection", type=Path, metavar="COLLECTION_JSON", help="what a full run must execute")
    parser.add_argument("--at-least", type=int, metavar="N", help="a subset's run: no collection, N tests passed")
    parser.add_argument("--test-exit-status", type=int, action="append", default=[], help="once per test command")
    args = parser.parse_args(argv)
    if (args.collection is None) == (args.at_least is None):
        parser.error("give either --collection COLLECTION_JSON or --at-least N")
    if args.at_least is not None and len(args.junit) > 1:
        parser.error("--at-least checks one report")
    outcomes, unread = junit_outcomes(args.junit)
    if args.at_least is not None:
        lines, problems = check_subset(outcomes, args.at_least)
    else:
        try:
            collection = json.loads(args.collection.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"CI check failed: no collection of tests/ ({exc})")
            return 1
        lines, problems = check(outcomes, collection)
    statuses = [f"a test command exited with status {status}" for status in args.test_exit_status if status]
    problems = statuses + unread + problems
    print(f"CI check of {', '.join(map(str, args.junit))}:", *lines, sep="\n")
    if problems:
        print("CI check failed:", *(f"- {problem}" for problem in problems), sep="\n")
        return 1
    print(
        "CI check passed:", "every test passed" if args.at_least is not None else "every collected test ran and passed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
