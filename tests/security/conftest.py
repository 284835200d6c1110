"""The security regression suite: each attack against a real server over TLS, with its bound.

Tests that need settings of their own start a server with :func:`running_server`; the others
share the session's ``server`` (``tests/conftest.py``), or :func:`kms_door` for the AWS KMS API (a
failed-authentication burst its refusal tests never spend) with :func:`kms_admin`, an admin's
access key there.
"""

import pytest

from tests.e2e.conftest import Server, running_server
from tests.kms_api.conftest import Pair, new_pair

__all__ = ["Pair", "Server", "kms_admin", "kms_door", "running_server"]


@pytest.fixture(scope="session")
def kms_door(kms_server: Server) -> Server:
    """The session's server of the AWS doors (``tests/conftest.py``) for the KMS door's attacks; keys
    may be destroyed at once (within a second)."""
    return kms_server


@pytest.fixture(scope="session")
def kms_admin(kms_door: Server) -> Pair:
    return new_pair(kms_door, "security-admin", "admin")
