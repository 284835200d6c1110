"""The ``aws-encryption-sdk`` sdist from PyPI, fetched by pip at test time and cached under ``var/``
(``tests/support/third_party_suite.py``: the version and the archive's SHA-256 pinned, checked on
every use)."""

from __future__ import annotations

from pathlib import Path

from tests.support.third_party_suite import CACHE, FetchError, PinnedSdist

__all__ = ["ARCHIVE", "VERSION", "FetchError", "extract", "sdist"]

ESDK = PinnedSdist(
    project="aws-encryption-sdk",
    version="4.0.7",
    sha256="3fa7d2e799f34e841e31aed3d725054bdcdda7b1578066d0a9b7c65bd192e594",
    suite="test/integration",
    needed_by="the Encryption SDK suite",
)
VERSION = ESDK.version
ARCHIVE = ESDK.archive


def sdist(cache: Path = CACHE) -> Path:
    """The pinned sdist in ``cache``: downloaded by pip when missing, its SHA-256 checked every time."""
    return ESDK.fetch(cache)


def extract(archive: Path, into: Path) -> Path:
    """The sdist unpacked in ``into``; its root (which holds ``test/integration``)."""
    return ESDK.extract(archive, into)
