"""Other people's test suites, run unmodified: their sdists from PyPI, fetched by pip at test time
and cached under ``var/``, and the JUnit reports of their runs.

A ``PinnedSdist`` names a version and the archive's SHA-256: pip verifies the hash before it keeps
(or builds anything from) the download, and a cached archive is hashed again on every use, so a
cache hit needs no network and a corrupted or substituted archive is refused, never run. The
archive stays in ``var/third_party/`` (ignored by git); each run extracts it afresh into a
temporary directory. Used by the AWS Encryption SDK's suite (``tests/kms_api/esdk_sdist.py``) and
PyKMIP's (``tests/kmip/test_pykmip_suite.py``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(__file__).resolve().parents[2] / "var" / "third_party"


class FetchError(Exception):
    """The sdist could not be fetched or does not match its pinned hash (the message says which)."""


@dataclass(frozen=True)
class PinnedSdist:
    """One release's sdist: ``project==version`` whose archive hashes to ``sha256``, holding the
    suite directory ``suite`` (relative to its root); ``needed_by`` names the suite in errors."""

    project: str
    version: str
    sha256: str
    suite: str
    needed_by: str

    @property
    def archive(self) -> str:
        """The archive's file name as pip saves it (the project's name normalised, PEP 625)."""
        return f"{self.project.lower().replace('-', '_')}-{self.version}.tar.gz"

    def fetch(self, cache: Path = CACHE) -> Path:
        """The archive in ``cache``: downloaded by pip when missing, its SHA-256 checked every time."""
        archive = cache / self.archive
        if not archive.exists():
            self._download(cache)
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != self.sha256:
            raise FetchError(
                f"{archive} has SHA-256 {digest}, not the pinned {self.sha256}: delete it to fetch it again "
                f"(or, for a new version, change its version and SHA-256 where {self.project} is pinned)"
            )
        return archive

    def extract(self, archive: Path, into: Path) -> Path:
        """The sdist unpacked in ``into`` (tarfile's ``data`` filter: no links or paths outside it); its root."""
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
        root = into / self.archive.removesuffix(".tar.gz")
        if not (root / self.suite).is_dir():
            raise FetchError(f"{archive} has no {self.suite} under {root.name}/")
        return root

    def _download(self, cache: Path) -> None:
        """``pip download`` of the sdist (no dependencies, hash required) into ``cache``, atomically."""
        pin = f"{self.project}=={self.version}"
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as scratch:
            requirement = Path(scratch) / "requirement.txt"
            requirement.write_text(f"{pin} --hash=sha256:{self.sha256}\n")
            command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
            command += ["--require-hashes", "-r", str(requirement), "-d", scratch, "--quiet"]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=dict(os.environ))
            except subprocess.TimeoutExpired as timeout:
                raise FetchError(f"pip download of {pin} timed out after 600 s") from timeout
            fetched = Path(scratch) / self.archive
            if done.returncode != 0 or not fetched.exists():
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
                raise FetchError(
                    f"could not download the {pin} sdist from PyPI (offline? {self.needed_by} needs it once; "
                    f"afterwards {cache / self.archive} is used): pip exited {done.returncode}\n{tail}"
                )
            fetched.replace(cache / self.archive)


def outcomes(report: Path) -> dict[str, str]:
    """Each test case of a JUnit report (``classname::name``): ``passed``, ``failed`` or ``skipped``."""
    found: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 (the subprocess's own report)
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        kind = "failed" if kinds & {"failure", "error"} else "skipped" if kinds else "passed"
        found[f"{case.get('classname')}::{case.get('name')}"] = kind
    return found
