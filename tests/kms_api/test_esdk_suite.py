"""The AWS Encryption SDK's own integration suite (``test/integration`` of its PyPI sdist, ``-m integ``)
run unmodified against two keys of ours on the real server over TLS.

The suite is a subprocess of its own (``python -m pytest`` in the extracted sdist: its rootdir,
its ``setup.cfg``, its markers), importing the SDK from the sdist's ``src/`` so code and tests are
the pinned release. It reads the key ARNs from the environment variables of its
``integration_test_utils.py`` and builds every KMS client itself from the environment:
``AWS_ENDPOINT_URL_KMS`` sends all of them to us, ``AWS_CA_BUNDLE`` trusts our CA, and the
access key is an ``app`` principal's that the keys' policies allow to encrypt, decrypt and
generate data keys — nothing more. Its JUnit report must show every selected test passed and at
least ``PASSED_AT_LEAST`` of them, so a suite that collected nothing (or skipped) fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Server, free_port
from tests.kms_api import esdk_sdist
from tests.kms_api.conftest import new_pair
from tests.kms_api.test_operations import grant
from tests.support.third_party_suite import outcomes

pytestmark = pytest.mark.interop  # make test-interop: the Encryption SDK's own integration suite

SUITE = "test/integration"
KEY_ID_VARIABLES = (  # test/integration/integration_test_utils.py
    "AWS_ENCRYPTION_SDK_PYTHON_INTEGRATION_TEST_AWS_KMS_KEY_ID",
    "AWS_ENCRYPTION_SDK_PYTHON_INTEGRATION_TEST_AWS_KMS_KEY_ID_2",
)
# Deselected, each for a reason the README repeats: they cannot apply to any endpoint but AWS's own.
REMOVE_BAD_CLIENT = f"{SUITE}/test_i_aws_encrytion_sdk_client.py::test_remove_bad_client"
"""Expects a client of the made-up region ``us-fakey-12`` to fail to connect (``EndpointConnectionError``,
no such AWS host); with ``AWS_ENDPOINT_URL_KMS`` every region's client reaches the endpoint."""
AWS_OWNED_VECTORS = 44
"""``test_kat_commitment.py::test_kat`` vectors whose ``keyring-type`` is ``aws-kms``: their data keys are
wrapped by AWS KMS keys of AWS's own account (658956600833, us-west-2) that only AWS can unwrap. The two
``static`` vectors (a raw key, no KMS) run."""
INTEG_TESTS = 94
"""What ``-m integ`` collects from the 4.0.7 sdist's ``test/integration``."""
PASSED_AT_LEAST = INTEG_TESTS - 1 - AWS_OWNED_VECTORS
NOT_INTEG = 1
"""Deselected by ``-m integ`` itself: ``test_i_xcompat_kms.py``'s ``accept`` test (a manifest the sdist lacks)."""


def aws_owned_vectors(root: Path) -> list[str]:
    """The node ids of the known-answer vectors whose data keys only AWS's KMS can unwrap."""
    vectors = json.loads((root / "test" / "resources" / "commitment-test-vectors.json").read_text())["tests"]
    ids = [v["comment"] for v in vectors if v["keyring-type"] == "aws-kms"]
    return [f"{SUITE}/test_kat_commitment.py::test_kat[{name}]" for name in ids]


def suite_environment(server: Server, arns: list[str], access_key_id: str, secret: str, root: Path) -> dict[str, str]:
    """The caller's environment less anything AWS, pytest or keymanager, plus the suite's own settings."""
    dropped = ("AWS_", "PYTEST_", "KM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and k != "PYTHONPATH"}
    env |= dict(zip(KEY_ID_VARIABLES, arns, strict=True))
    return env | {
        "PYTHONPATH": str(root / "src"),
        "AWS_ENDPOINT_URL_KMS": server.url,
        "AWS_CA_BUNDLE": str(server.ca),
        "AWS_ACCESS_KEY_ID": access_key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",
    }


@pytest.fixture(scope="session")  # set up before the session's server: no sdist and no index fail quickly
def sdist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned sdist, extracted in a fresh directory."""
    try:
        return esdk_sdist.extract(esdk_sdist.sdist(), tmp_path_factory.mktemp("esdk-sdist"))
    except esdk_sdist.FetchError as failed:
        problem = str(failed)
    pytest.fail(f"the Encryption SDK's integration suite cannot run: {problem}", pytrace=False)


def test_the_encryption_sdks_integration_suite_passes_against_our_keys(
    sdist_root: Path, kms_server: Server, admin_kms: Any, tmp_path: Path
) -> None:
    root = sdist_root
    runner = new_pair(kms_server, "esdk-suite", "app")
    rights = {op: [runner.principal] for op in ("encrypt", "decrypt", "generate_data_key")}
    arns = []
    for n in (1, 2):
        key = admin_kms.create_key(Description=f"the Encryption SDK's integration suite, key {n}")["KeyMetadata"]
        grant(kms_server, key["KeyId"], **rights)
        arns.append(key["Arn"])

    deselected = [REMOVE_BAD_CLIENT, *aws_owned_vectors(root)]
    assert len(deselected) == 1 + AWS_OWNED_VECTORS
    report = tmp_path / "esdk-junit.xml"
    command = [sys.executable, "-m", "pytest", "-m", "integ", SUITE, "-p", "no:cacheprovider", "-q", "-rfEs"]
    command += [f"--junitxml={report}", *(f"--deselect={node}" for node in deselected)]
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=root,
        env=suite_environment(kms_server, arns, runner.access_key_id, runner.secret_access_key, root),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    summary = "\n".join(done.stdout.strip().splitlines()[-25:])
    assert done.returncode == 0, f"the Encryption SDK's suite failed:\n{summary}\n{done.stderr[-3000:]}"

    ran = outcomes(report)
    assert set(ran.values()) == {"passed"}, summary
    assert len(ran) >= PASSED_AT_LEAST, f"only {len(ran)} of the suite's tests ran:\n{summary}"
    assert not set(deselected) & {f"{SUITE}/{name}" for name in ran}
    assert f"{len(ran)} passed, {len(deselected) + NOT_INTEG} deselected" in summary, summary
    print(f"Encryption SDK {esdk_sdist.VERSION}: {len(ran)} passed in {time.monotonic() - started:.0f} s")


def pip_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip without its configuration files, its index a closed port of this machine, no retries."""
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{free_port()}/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")


def test_an_unreachable_index_is_a_failure_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip_offline(monkeypatch)
    with pytest.raises(esdk_sdist.FetchError, match=r"could not download the aws-encryption-sdk==4\.0\.7 sdist"):
        esdk_sdist.sdist(tmp_path)
    assert list(tmp_path.iterdir()) == []  # no partial archive left to be taken for a cached one


def test_a_cached_archive_is_used_offline_and_checked_against_the_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = esdk_sdist.sdist()  # downloads into var/ on the first run
    (tmp_path / esdk_sdist.ARCHIVE).write_bytes(real.read_bytes())
    pip_offline(monkeypatch)
    assert esdk_sdist.sdist(tmp_path) == tmp_path / esdk_sdist.ARCHIVE

    # One byte changed in the cache: refused with what to do, never extracted or run.
    data = bytearray(real.read_bytes())
    data[len(data) // 2] ^= 1
    (tmp_path / esdk_sdist.ARCHIVE).write_bytes(bytes(data))
    with pytest.raises(esdk_sdist.FetchError, match=r"not the pinned .* delete it to fetch it again"):
        esdk_sdist.sdist(tmp_path)
