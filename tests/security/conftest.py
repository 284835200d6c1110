"""The security regression suite: each attack against a real server over TLS, with its bound.

Tests that need settings of their own start a server with :func:`running_server`; the others
share the session's :func:`server`, or :func:`kms_door` for the AWS KMS API (a failed-authentication
burst its refusal tests never spend) with :func:`kms_admin`, an admin's access key there.
"""

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Server, running_server, server
from tests.kms_api.conftest import Pair, new_pair

__all__ = ["Pair", "Server", "kms_admin", "kms_door", "running_server", "server"]


@pytest.fixture(scope="session")
def kms_door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real two-worker server for the KMS door's attacks; keys may be destroyed at once (within a second)."""
    with running_server(
        tmp_path_factory.mktemp("kms-door"),
        KM_AUTH_FAILURE_BURST="10000",
        KM_MIN_PENDING_DAYS="0",
        KM_MAINTENANCE_INTERVAL_SECONDS="1",
    ) as started:
        yield started


@pytest.fixture(scope="session")
def kms_admin(kms_door: Server) -> Pair:
    return new_pair(kms_door, "security-admin", "admin")
