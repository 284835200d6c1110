"""``kmctl``: the command line of keymanager, on top of ``keymanager_sdk.KeyManager``.

Exit codes: 0 success; 1 the service refused (its error code and message on stderr, naming the
key or principal), a decryption failed, a MAC did not verify, or the audit chain is broken; 2
usage or configuration error, decided before anything is sent (one line: bad arguments or
``--policy`` JSON, no token or client certificate, an ``http://`` URL, a missing CA, token or
input file, a field over the limit); 3 the service could not be reached; 4 the call awaits
approval (dual control: the service holds it as an approval request, whose id is printed; run the
same command again once it is approved). With ``--output json`` (or ``--json``) an error is
printed on stderr as JSON in the API's shape: ``{"error": {"code", "message"}, "request_id",
"exit_code"}``; a call awaiting approval as the service's answer, ``{"status": "pending_approval",
"request_id", "operations", "approvals_required", "expires_at", "exit_code"}``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from keymanager_sdk._client import KeyManager
from keymanager_sdk._exceptions import (
    APIError,
    ApprovalPending,
    ConfigurationError,
    KeyManagerError,
    PayloadTooLarge,
    TransportError,
)
from keymanager_sdk.cli._completion import complete_if_asked
from keymanager_sdk.cli._config import UsageError, resolve
from keymanager_sdk.cli._crypto import OVER_THE_FIELD_LIMIT
from keymanager_sdk.cli._parser import parser

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_PENDING = 4
NO_CREDENTIAL = (
    "no credential: set KM_TOKEN or KM_TOKEN_FILE (or KM_CLIENT_CERT and KM_CLIENT_KEY), or write a profile "
    "('keymanager init' writes var/kmctl.toml for the local service)"
)


def _client(args: object) -> KeyManager:
    overrides = {"url": getattr(args, "url", None), "ca": getattr(args, "ca", None)}
    conn = resolve(overrides, getattr(args, "config", None), getattr(args, "profile", None), os.environ)
    if conn.token is None and conn.client_cert is None:
        raise UsageError(NO_CREDENTIAL)
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


def _pending(exc: ApprovalPending, as_json: bool) -> int:
    """Print that the call awaits approval (request id, operations, approvals, expiry) on stderr; ``EXIT_PENDING``."""
    if as_json:
        body = {
            "status": "pending_approval",
            "request_id": exc.request_id,
            "operations": list(exc.operations),
            "approvals_required": exc.approvals_required,
            "expires_at": exc.expires_at.isoformat(),
            "exit_code": EXIT_PENDING,
        }
        print(json.dumps(body), file=sys.stderr)
    else:
        print(
            f"kmctl: awaiting approval: request {exc.request_id} ({', '.join(exc.operations)}){exc.about} needs "
            f"{exc.approvals_required} approval(s) before {exc.expires_at.isoformat()} "
            f"('kmctl approvals show {exc.request_id}'); run the same command again once it is approved",
            file=sys.stderr,
        )
    return EXIT_PENDING


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (errors then are JSON too), read before parsing it."""
    pairs = zip(argv, [*argv[1:], ""], strict=True)
    return "--json" in argv or "--output=json" in argv or any(a in ("--output", "-o") and b == "json" for a, b in pairs)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one kmctl command; the process exit code."""
    complete_if_asked(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
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
    except ApprovalPending as exc:
        return _pending(exc, as_json)
    except PayloadTooLarge as exc:
        message = f"{exc.message}{exc.about}; {OVER_THE_FIELD_LIMIT}"
        return _fail(EXIT_REFUSED, exc.code, message, as_json, exc.request_id)
    except APIError as exc:
        return _fail(EXIT_REFUSED, exc.code, exc.message + exc.about, as_json, exc.request_id)
    except (KeyManagerError, OSError, ValueError) as exc:
        return _fail(EXIT_REFUSED, "error", str(exc), as_json)


if __name__ == "__main__":
    sys.exit(main())
