"""``kmctl``: the admin command line of keymanager, on top of ``keymanager_sdk.KeyManager``.

Exit codes: 0 success; 1 the service refused (its error code and message on stderr), a
decryption failed, or the audit chain is broken; 2 usage or configuration error (one line:
bad arguments or ``--policy`` JSON, a missing token, CA or input file, a field over the limit);
3 the service could not be reached. With ``--json`` an error is printed on stderr as JSON in
the API's shape: ``{"error": {"code", "message"}, "request_id", "exit_code"}``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from keymanager_sdk._client import KeyManager
from keymanager_sdk._exceptions import APIError, ConfigurationError, KeyManagerError, PayloadTooLarge, TransportError
from keymanager_sdk.cli._commands import OVER_THE_FIELD_LIMIT, parser
from keymanager_sdk.cli._config import UsageError, resolve

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


def _client(args: object) -> KeyManager:
    overrides = {"url": getattr(args, "url", None), "ca": getattr(args, "ca", None)}
    conn = resolve(overrides, getattr(args, "config", None), getattr(args, "profile", None), os.environ)
    return KeyManager(conn.url, token=conn.token, ca=conn.ca, client_cert=conn.client_cert, client_key=conn.client_key)


def _fail(exit_code: int, code: str, message: str, as_json: bool, request_id: str = "") -> int:
    """Print one error line (or its JSON) on stderr; ``exit_code``."""
    if as_json:
        body = {"error": {"code": code, "message": message}, "request_id": request_id or None, "exit_code": exit_code}
        print(json.dumps(body), file=sys.stderr)
    else:
        prefixes = {"usage": "", "error": "", "unreachable": "cannot reach the service: "}
        prefix = prefixes.get(code, f"{code}: ")
        suffix = f" (request {request_id})" if request_id else ""
        print(f"kmctl: {prefix}{message}{suffix}", file=sys.stderr)
    return exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one kmctl command; the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    try:
        args = parser().parse_args(argv)
        if args.standalone is not None:
            return int(args.standalone(args))
        with _client(args) as client:
            return int(args.run(client, args))
    except (UsageError, ConfigurationError) as exc:
        return _fail(EXIT_USAGE, "usage", str(exc), as_json)
    except TransportError as exc:
        return _fail(EXIT_UNREACHABLE, "unreachable", str(exc), as_json)
    except PayloadTooLarge as exc:
        message = f"{exc.message}; {OVER_THE_FIELD_LIMIT}"
        return _fail(EXIT_REFUSED, exc.code, message, as_json, exc.request_id)
    except APIError as exc:
        return _fail(EXIT_REFUSED, exc.code, exc.message, as_json, exc.request_id)
    except (KeyManagerError, OSError, ValueError) as exc:
        return _fail(EXIT_REFUSED, "error", str(exc), as_json)


if __name__ == "__main__":
    sys.exit(main())
