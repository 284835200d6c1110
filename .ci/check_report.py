"""Fail unless the JUnit report shows no skipped tests and real SoftHSM and PostgreSQL tests."""

import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
cases = list(root.iter("testcase"))
skipped = [c for c in cases if c.find("skipped") is not None]
failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
names = [f"{c.get('classname')}::{c.get('name')}" for c in cases]
postgres = [n for n in names if "postgres" in n]
hsm = [n for n in names if n.startswith("tests.hsm.")]
e2e = [n for n in names if n.startswith("tests.e2e.")]
print(f"report: {len(cases)} tests, {len(failed)} failed, {len(skipped)} skipped; "
      f"{len(postgres)} PostgreSQL, {len(hsm)} HSM, {len(e2e)} end-to-end")
problems = []
if skipped:
    problems.append("skipped tests: " + ", ".join(f"{c.get('classname')}::{c.get('name')}" for c in skipped))
if failed:
    problems.append(f"{len(failed)} tests failed")
if not postgres:
    problems.append("no PostgreSQL test ran")
if not hsm:
    problems.append("no SoftHSM test ran")
if not e2e:
    problems.append("no end-to-end test ran")
if problems:
    print("CI check failed: " + "; ".join(problems))
    sys.exit(1)
