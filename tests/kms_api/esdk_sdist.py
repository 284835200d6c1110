"""The ``aws-encryption-sdk`` sdist from PyPI, fetched by pip at test time and cached under ``var/``.

The version and the archive's SHA-256 are pinned: pip verifies the hash before it keeps (or builds
anything from) the download, and a cached archive is hashed again on every use, so a cache hit
needs no network and a corrupted or substituted archive is refused, never run. The archive stays
in ``var/`` (ignored by git); each run extracts it afresh into a temporary directory.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "4.0.7"
SHA256 = "3fa7d2e799f34e841e31aed3d725054bdcdda7b1578066d0a9b7c65bd192e594"
ARCHIVE = f"aws_encryption_sdk-{VERSION}.tar.gz"
CACHE = Path(__file__).resolve().parents[2] / "var" / "third_party"


class FetchError(Exception):
    """The sdist could not be fetched or does not match its pinned hash (the message says which)."""


def sdist(cache: Path = CACHE) -> Path:
    """The pinned sdist in ``cache``: downloaded by pip when missing, its SHA-256 checked every time."""
    archive = cache / ARCHIVE
    if not archive.exists():
        download(cache)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SHA256:
        raise FetchError(
            f"{archive} has SHA-256 {digest}, not the pinned {SHA256}: delete it to fetch it again "
            f"(or, for a new version, change VERSION and SHA256 in {Path(__file__).name})"
        )
    return archive


def download(cache: Path) -> None:
    """``pip download`` of the sdist (no dependencies, hash required) into ``cache``, atomically."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as scratch:
        requirement = Path(scratch) / "requirement.txt"
        requirement.write_text(f"aws-encryption-sdk=={VERSION} --hash=sha256:{SHA256}\n")
        command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
        command += ["--require-hashes", "-r", str(requirement), "-d", scratch, "--quiet"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=dict(os.environ))
        except subprocess.TimeoutExpired as timeout:
            raise FetchError(f"pip download of aws-encryption-sdk=={VERSION} timed out after 600 s") from timeout
        fetched = Path(scratch) / ARCHIVE
        if done.returncode != 0 or not fetched.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
            raise FetchError(
                f"could not download the aws-encryption-sdk=={VERSION} sdist from PyPI (offline? the Encryption "
                f"SDK suite needs it once; afterwards {cache / ARCHIVE} is used): pip exited {done.returncode}\n{tail}"
            )
        fetched.replace(cache / ARCHIVE)


def extract(archive: Path, into: Path) -> Path:
    """The sdist unpacked in ``into`` (tarfile's ``data`` filter: no links or paths outside it); its root."""
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    root = into / ARCHIVE.removesuffix(".tar.gz")
    if not (root / "test" / "integration").is_dir():
        raise FetchError(f"{archive} has no test/integration under {root.name}/")
    return root
