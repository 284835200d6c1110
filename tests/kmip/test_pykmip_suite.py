"""PyKMIP's own integration suite (``kmip/tests/integration`` of its PyPI sdist) run unmodified
against our KMIP listener over mTLS.

The suite is a subprocess of its own (``python -m pytest`` in the extracted sdist, its rootdir and
its ``conftest.py``), importing PyKMIP from the sdist so code and tests are the pinned release.
Its conftest builds every client (``KMIPProxy`` and ``ProxyKmipClient``) from the section named by
its ``--config`` option in ``~/.pykmip/pykmip.conf``: ``HOME`` is a temporary directory holding one
section for a principal bound to a ``keymanager dev-cert`` certificate. It selects as PyKMIP's own
``tox -e integration`` does (``-m "not ignore"``: ``test_kmip_client.py`` starts a server script of
its own on port 9090), and deselects ``DESELECTED``, each for its reason, which the README's
section "KMIP" repeats. Its JUnit report must show every other test passed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.kmip.conftest import REFERENCE, KmipServer
from tests.support.third_party_suite import FetchError, PinnedSdist, outcomes

pytestmark = pytest.mark.interop  # make test-interop: PyKMIP's own integration suite

PYKMIP = PinnedSdist(
    project="pykmip",
    version="0.11.0",
    sha256="eb42e2d9674e470935d98474b8502e675894cc8489362d8419fdd957319f2b3e",
    suite="kmip/tests/integration",
    needed_by="PyKMIP's integration suite",
)
SUITE = PYKMIP.suite
SECTION = "keymanager"
README = Path(__file__).resolve().parents[2] / "README.md"

COLLECTED = 41
"""What the 0.11.0 sdist's ``kmip/tests/integration`` holds."""
IGNORED = 4
"""Deselected by ``-m "not ignore"``, PyKMIP's own selection: ``test_kmip_client.py``'s four tests."""

INTEGRATION = "test_integration.py::TestIntegration::"
PROXY = "test_proxykmipclient.py::TestProxyKmipClientIntegration::"
PRIVATE_KEY_MATERIAL = "Gets the private key of a pair it created: private keys never leave the HSM"
ASYMMETRIC_REGISTER = "Registers an RSA key: asymmetric keys are born in the HSM (CreateKeyPair), not registered"
WRAPPED_GET = "Gets a key wrapped under another: key material never leaves the HSM"
WRAPPED_REGISTER = "Registers wrapped material to keep as is: keys are unwrapped into the HSM"
SPLIT_KEY = "Registers a Split Key (KMIP 2.0 key shares): not an object type offered here"
DERIVE_KEY = "DeriveKey: not offered (Operation Not Supported)"
IDEA = "Creates an IDEA key: keys are made in the HSM, AES only"
CALLERS_IV = "Encrypts with an IV of its own: the server makes every IV (issue 41: one key, one mode, the nonce ours)"


DESELECTED: dict[str, str] = {
    f"{INTEGRATION}test_key_pair_create_get_destroy": PRIVATE_KEY_MATERIAL,
    f"{INTEGRATION}test_private_key_register_get_destroy": ASYMMETRIC_REGISTER,
    f"{INTEGRATION}test_public_key_register_get_destroy": ASYMMETRIC_REGISTER,
    f"{INTEGRATION}test_split_key_register_get_destroy": SPLIT_KEY,
    f"{PROXY}test_create_get_wrapped_destroy": WRAPPED_GET,
    f"{PROXY}test_register_wrapped_get_destroy": WRAPPED_REGISTER,
    f"{PROXY}test_asymmetric_key_pair_create_get_destroy": PRIVATE_KEY_MATERIAL,
    f"{PROXY}test_public_key_register_get_destroy": ASYMMETRIC_REGISTER,
    f"{PROXY}test_private_key_register_get_destroy": ASYMMETRIC_REGISTER,
    f"{PROXY}test_derive_key_using_pbkdf2": DERIVE_KEY,
    f"{PROXY}test_derive_key_using_encryption": DERIVE_KEY,
    f"{PROXY}test_derive_key_using_nist_800_108c": DERIVE_KEY,
    f"{PROXY}test_derive_key_using_hmac": DERIVE_KEY,
    f"{PROXY}test_create_getattributes_locate_destroy": IDEA,
    f"{PROXY}test_split_key_register_get_destroy": SPLIT_KEY,
    f"{PROXY}test_modify_delete_attribute": IDEA,
    f"{PROXY}test_encrypt_decrypt": CALLERS_IV,
}
"""Node id (under ``kmip/tests/integration/services/``) to the reason it cannot pass against us: each by
design (docs/kmip.md, "What is refused")."""


@pytest.fixture(scope="session")  # before the session's server: no sdist and no index fail quickly
def pykmip_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned sdist, extracted in a fresh directory."""
    try:
        return PYKMIP.extract(PYKMIP.fetch(), tmp_path_factory.mktemp("pykmip-sdist"))
    except FetchError as failed:
        problem = str(failed)
    pytest.fail(f"PyKMIP's integration suite cannot run: {problem}", pytrace=False)


def suite_environment(root: Path, home: Path) -> dict[str, str]:
    """The caller's environment less anything pytest or keymanager, ``HOME`` the suite's configuration."""
    dropped = ("PYTEST_", "KM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and k != "PYTHONPATH"}
    return env | {"PYTHONPATH": str(root), "HOME": str(home), "PYTHONWARNINGS": "ignore"}


def node(name: str) -> str:
    """The suite's node id of ``name`` (``test_module.py::Class::test``)."""
    return f"{SUITE}/services/{name}"


def test_pykmips_integration_suite_passes_against_our_server(
    pykmip_root: Path, kmip_server: KmipServer, tmp_path: Path
) -> None:
    identity = kmip_server.principal("pykmip-suite", create_keys=True, key_store=True)  # a key-store client
    home = tmp_path / "home"
    kmip_server.pykmip_conf(identity, home / ".pykmip" / "pykmip.conf", SECTION)
    deselected = [] if REFERENCE else [node(name) for name in DESELECTED]

    report = tmp_path / "pykmip-junit.xml"
    command = [sys.executable, "-m", "pytest", SUITE, "-m", "not ignore", "--config", SECTION]
    command += ["-p", "no:cacheprovider", "-q", "-rfEs", f"--junitxml={report}", "-o", "junit_logging=log"]
    command += [f"--deselect={name}" for name in deselected]
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=pykmip_root,
        env=suite_environment(pykmip_root, home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = "\n".join(done.stdout.strip().splitlines()[-3:])
    assert done.returncode == 0, f"PyKMIP's suite failed:\n{why(report)}\n{summary}\n{done.stderr[-3000:]}"

    ran = outcomes(report)
    assert set(ran.values()) == {"passed"}, summary
    assert len(ran) == COLLECTED - IGNORED - len(deselected), summary
    assert f"{len(ran)} passed, {IGNORED + len(deselected)} deselected" in summary, summary
    print(f"PyKMIP {PYKMIP.version}: {len(ran)} passed in {time.monotonic() - started:.0f} s")


def why(report: Path) -> str:
    """Each failed test of the JUnit report and the last line saying why (its own failure, not a
    clean-up's: testtools puts those first, between braces)."""
    lines = []
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 (the subprocess's own report)
        for failure in (*case.iter("failure"), *case.iter("error")):
            said = [line.strip() for line in (failure.text or "").split("}}}")[-1].splitlines() if line.strip()]
            reason = next((line for line in reversed(said) if re.search(r"(Error|Failure|Exception)\b", line)), "")
            logs = "".join(log.text or "" for log in case.iter("system-out")).splitlines()
            logged = [line for line in logs if line.startswith("ERROR")]  # the suite logs the result message
            lines.append(f"{case.get('name')}: {reason[:300]}{' | ' + logged[-1][:300] if logged else ''}")
    return "\n".join(lines)


def readme_deselections() -> dict[str, str]:
    """The README's table of deselected tests (section "KMIP"): node id to reason."""
    found = re.search(r"<!-- kmip-deselected:start -->\n(.*?)<!-- kmip-deselected:end -->", README.read_text(), re.S)
    assert found is not None, "README.md has no <!-- kmip-deselected:start --> table"
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", found.group(1), re.MULTILINE)
    return dict(rows)


def test_the_readme_names_every_deselected_test_with_its_reason() -> None:
    assert readme_deselections() == DESELECTED
