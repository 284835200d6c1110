"""``kmctl``: the admin command line of keymanager, on top of ``keymanager_sdk.KeyManager``.

Exit codes: 0 success; 1 the service refused (its error code and message on stderr), a
decryption failed, or the audit chain is broken; 2 usage or configuration error; 3 the
service could not be reached.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from keymanager_sdk._client import KeyManager
from keymanager_sdk._exceptions import APIError, KeyManagerError, TransportError
from keymanager_sdk.cli._commands import parser
from keymanager_sdk.cli._config import ConfigError, resolve

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


def _client(args: object) -> KeyManager:
    overrides = {"url": getattr(args, "url", None), "ca": getattr(args, "ca", None)}
    conn = resolve(overrides, getattr(args, "config", None), getattr(args, "profile", None), os.environ)
    return KeyManager(conn.url, token=conn.token, ca=conn.ca, client_cert=conn.client_cert, client_key=conn.client_key)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one kmctl command; the process exit code."""
    args = parser().parse_args(argv)
    try:
        with _client(args) as client:
            return int(args.run(client, args))
    except ConfigError as exc:
        print(f"kmctl: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TransportError as exc:
        print(f"kmctl: cannot reach the service: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except APIError as exc:
        suffix = f" (request {exc.request_id})" if exc.request_id else ""
        print(f"kmctl: {exc.code}: {exc.message}{suffix}", file=sys.stderr)
        return EXIT_REFUSED
    except (KeyManagerError, OSError, ValueError) as exc:
        print(f"kmctl: {exc}", file=sys.stderr)
        return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main())
