"""The security regression suite: each attack against a real server over TLS, with its bound.

Tests that need settings of their own start a server with :func:`running_server`; the others
share the session's :func:`server`.
"""

from tests.e2e.conftest import Server, running_server, server

__all__ = ["Server", "running_server", "server"]
