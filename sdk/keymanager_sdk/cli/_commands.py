"""kmctl's sub-commands: the argument parser, and one small function per command.

Each command function takes the client and the parsed arguments, prints its result and
returns the exit code; errors propagate to ``kmctl.main``, which prints them.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from keymanager_sdk._client import KeyManager
from keymanager_sdk._core import __version__
from keymanager_sdk._envelope import DEFAULT_SEGMENT_SIZE, write_atomically
from keymanager_sdk._exceptions import Forbidden
from keymanager_sdk._models import OPERATIONS
from keymanager_sdk.cli import _completion, _progress
from keymanager_sdk.cli._access_keys import access_keys_create, access_keys_delete, access_keys_list
from keymanager_sdk.cli._config import UsageError
from keymanager_sdk.cli._output import audit_rows, show
from keymanager_sdk.cli._policy import policy_add, policy_remove

Command = Callable[[KeyManager, argparse.Namespace], int]
ALGORITHMS = [
    "AES_256_CBC_HMAC_SHA256",
    "AES_256_GCM",
    "HMAC_SHA224",
    "HMAC_SHA256",
    "HMAC_SHA384",
    "HMAC_SHA512",
    "FF1_AES_256",
]
FIELD_INPUT_MAX = 768 * 1024
"""The largest input kmctl sends as one field: base64 of it fills the service's default 1 MiB request limit."""
OVER_THE_FIELD_LIMIT = (
    "too large for a field (the service takes 64 KiB by default): use --envelope (local AES-256-GCM "
    "under a data key from the service) or --stream (through the service's HSM)"
)


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error raised as ``UsageError`` (one line, exit 2) instead of printed."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _print(args: argparse.Namespace, value: Any) -> int:
    show(value, args.json, sys.stdout)
    return 0


def _context(args: argparse.Namespace) -> dict[str, str] | None:
    pairs = args.context or []
    if not pairs:
        return None
    if any("=" not in p for p in pairs):
        raise UsageError("--context takes NAME=VALUE")
    return dict(p.split("=", 1) for p in pairs)


def _policy(text: str | None, option: str = "--policy") -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text
    except OSError as exc:
        raise UsageError(f"{option} {text}: {exc.strerror or exc}") from exc
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"{option} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError(f'{option} must be a JSON object, e.g. {{"encrypt": ["billing"]}}')
    return value


def _input(args: argparse.Namespace) -> BinaryIO:
    if not args.input:
        return sys.stdin.buffer
    try:
        return open(args.input, "rb")
    except OSError as exc:
        raise UsageError(f"--in {args.input}: {exc.strerror or exc}") from exc


def _write_output(args: argparse.Namespace, data: bytes) -> None:
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


# --- keys ----------------------------------------------------------------------------------------


def keys_create(client: KeyManager, args: argparse.Namespace) -> int:
    if args.token_format is not None or args.algorithm == "FF1_AES_256":
        fmt = _policy(args.token_format or "{}", "--token-format")
        key = client.create_token_key(args.name, fmt or {}, _policy(args.policy), args.description)
        return _print(args, key)
    key = client.create_key(
        args.name, args.algorithm, args.description, _policy(args.policy), args.rotation_period_days
    )
    return _print(args, key)


def keys_update(client: KeyManager, args: argparse.Namespace) -> int:
    key = client.update_key(
        args.key,
        description=args.description,
        policy=_policy(args.policy),
        min_decryption_version=args.min_decryption_version,
    )
    return _print(args, key)


def keys_delete(client: KeyManager, args: argparse.Namespace) -> int:
    return _print(args, client.schedule_key_deletion(args.key, args.pending_days))


def _key_action(method: str) -> Command:
    def run(client: KeyManager, args: argparse.Namespace) -> int:
        return _print(args, getattr(client, method)(args.key))

    return run


# --- principals ----------------------------------------------------------------------------------


def principals_create(client: KeyManager, args: argparse.Namespace) -> int:
    return _print(args, client.create_principal(args.name, args.role, args.cert_subject))


def principals_delete(client: KeyManager, args: argparse.Namespace) -> int:
    client.delete_principal(args.name)
    return 0


# --- cryptography --------------------------------------------------------------------------------


def encrypt(client: KeyManager, args: argparse.Namespace) -> int:
    if args.envelope or args.stream:
        return _large(client, args, encrypting=True)
    with _input(args) as src:
        data = src.read(FIELD_INPUT_MAX + 1)
    if len(data) > FIELD_INPUT_MAX:
        raise UsageError(f"the input is over {FIELD_INPUT_MAX // 1024} KiB, {OVER_THE_FIELD_LIMIT}")
    result = client.encrypt(args.key, data, _context(args))
    if args.json:
        return _print(args, result)
    _write_output(args, result.encode() + b"\n")
    return 0


def decrypt(client: KeyManager, args: argparse.Namespace) -> int:
    if args.envelope or args.stream:
        return _large(client, args, encrypting=False)
    with _input(args) as src:
        ciphertext = src.read(FIELD_INPUT_MAX * 2).decode("ascii", errors="replace").strip()
    _write_output(args, client.decrypt(ciphertext, _context(args), args.key))
    return 0


def tokenize(client: KeyManager, args: argparse.Namespace) -> int:
    result = client.tokenize(args.key, args.value, _context(args))
    if args.json:
        return _print(args, result)
    _write_output(args, result.token.encode() + b"\n")
    return 0


def detokenize(client: KeyManager, args: argparse.Namespace) -> int:
    value = client.detokenize(args.key, args.token, _context(args), key_version=args.key_version)
    _write_output(args, value.encode() + b"\n")
    return 0


def _large(client: KeyManager, args: argparse.Namespace, encrypting: bool) -> int:
    """``--envelope`` or ``--stream``: from ``--in`` or stdin to ``--out`` (complete, or absent) or stdout."""
    if args.envelope and args.stream:
        raise UsageError("--envelope and --stream exclude each other")
    if args.stream and not args.key:
        raise UsageError("decrypt --stream needs --key (the key the stream was encrypted with)")
    context = _context(args)
    verb = "encrypt" if encrypting else "decrypt"
    size = os.stat(args.input).st_size if args.input and os.path.isfile(args.input) else None

    def run(src: BinaryIO, dst: BinaryIO) -> object:
        if args.stream:
            onboard = client.encrypt_stream_onboard if encrypting else client.decrypt_stream_onboard
            return onboard(args.key, src, dst, context)
        if encrypting:
            return client.encrypt_stream(args.key, src, dst, context, args.segment_size * 1024)
        return client.decrypt_stream(src, dst, context)

    with _input(args) as raw, _progress.reading(raw, size, verb, args.progress) as src:
        if args.output:
            write_atomically(args.output, lambda dst: run(src, dst))
        else:
            try:
                run(src, sys.stdout.buffer)
            finally:
                sys.stdout.buffer.flush()
    return 0


# --- audit ---------------------------------------------------------------------------------------


def audit_list(client: KeyManager, args: argparse.Namespace) -> int:
    """Records oldest first (the first ``--limit``), or with ``--newest-first`` the last ``--limit``
    newest first (every matching record is read: narrow with ``--since``); keys shown by name."""
    filters = {"key": args.key, "principal": args.principal, "since": args.since, "action": args.action_filter}
    if args.newest_first:
        newest = collections.deque(client.iter_audit(**filters, page_size=1000), maxlen=args.limit)
        records = list(reversed(newest))
    else:
        records = client.audit(**filters, limit=args.limit)
    try:
        names = {key.id: key.name for key in client.list_keys()}
    except Forbidden:
        names = {}
    return _print(args, audit_rows(records, names))


def audit_verify(client: KeyManager, args: argparse.Namespace) -> int:
    result = client.verify_audit()
    _print(args, result)
    return 0 if result.ok else 1


# --- parser --------------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    parser.add_argument("--url", default=argparse.SUPPRESS, help="service URL (default: KM_URL or profile)")
    parser.add_argument("--ca", default=argparse.SUPPRESS, help="CA bundle of the server (default: KM_CA or profile)")
    parser.add_argument("--profile", default=argparse.SUPPRESS, help="profile name in the config file")
    parser.add_argument("--config", default=argparse.SUPPRESS, help="profile file (~/.config/kmctl/config.toml)")


def _sub(group: Any, name: str, run: Command, help_text: str) -> argparse.ArgumentParser:
    """A sub-command running ``run`` with the client."""
    parser: argparse.ArgumentParser = group.add_parser(name, help=help_text, description=help_text)
    _common(parser)
    parser.set_defaults(run=run)
    return parser


def _group(group: Any, name: str, help_text: str) -> Any:
    """A command with actions (``kmctl keys ACTION``)."""
    return group.add_parser(name, help=help_text).add_subparsers(dest="action", metavar="ACTION", required=True)


def _keys(group: Any) -> None:
    keys = _group(group, "keys", "manage keys")
    create = _sub(keys, "create", keys_create, "create a key")
    create.add_argument("name")
    create.add_argument("--algorithm", choices=ALGORITHMS)
    create.add_argument("--token-format", help='FF1_AES_256: JSON, e.g. {"keep_last": 4, "luhn": "valid"}')
    create.add_argument("--description")
    create.add_argument("--policy", help='JSON, e.g. {"encrypt": ["billing"]}, or @file.json')
    create.add_argument("--rotation-period-days", type=int)
    _sub(keys, "list", lambda c, a: _print(a, c.list_keys()), "list keys")
    for name, method, text in [
        ("show", "get_key", "show a key"),
        ("rotate", "rotate_key", "make a new primary version"),
        ("enable", "enable_key", "enable a key"),
        ("disable", "disable_key", "disable a key"),
        ("cancel-deletion", "cancel_key_deletion", "cancel a scheduled deletion (the key comes back disabled)"),
    ]:
        _sub(keys, name, _key_action(method), text).add_argument("key", help="name or id")
    update = _sub(keys, "update", keys_update, "change description, policy or min decryption version")
    update.add_argument("key")
    update.add_argument("--description")
    update.add_argument("--policy", help="JSON or @file.json; replaces the policy whole")
    update.add_argument("--min-decryption-version", type=int)
    delete = _sub(keys, "delete", keys_delete, "schedule a key's destruction")
    delete.add_argument("key")
    delete.add_argument("--pending-days", type=int, default=30)
    policy = _group(keys, "policy", "grant or revoke one operation (safe against concurrent edits)")
    for name, run, text in [
        ("add", policy_add, "grant OPERATION on KEY to PRINCIPAL"),
        ("remove", policy_remove, "revoke OPERATION on KEY from PRINCIPAL"),
    ]:
        edit = _sub(policy, name, run, text)
        edit.add_argument("key", help="name or id")
        edit.add_argument("operation", choices=OPERATIONS, metavar="OPERATION", help=", ".join(OPERATIONS))
        edit.add_argument("principal", help="principal name")


def _principals(group: Any) -> None:
    principals = _group(group, "principals", "manage principals")
    create = _sub(principals, "create", principals_create, "create a principal (prints its token once)")
    create.add_argument("name")
    create.add_argument("--role", required=True, choices=["admin", "app", "auditor"])
    create.add_argument("--cert-subject", help="RFC 4514 subject of its TLS client certificate")
    _sub(principals, "list", lambda c, a: _print(a, c.list_principals()), "list principals")
    _sub(principals, "delete", principals_delete, "delete a principal").add_argument("name")


def _access_keys(group: Any) -> None:
    access_keys = _group(group, "access-keys", "manage the access keys of the AWS KMS API (SigV4)")
    create = _sub(access_keys, "create", access_keys_create, "create an access key (prints its secret once)")
    create.add_argument("principal")
    create.add_argument("--access-key-id", help="register this id (16-128 of A-Z, 0-9) with the secret on stdin")
    create.add_argument("--secret-stdin", action="store_true", help="read the secret of --access-key-id from stdin")
    _sub(access_keys, "list", access_keys_list, "list a principal's access keys").add_argument("principal")
    delete = _sub(access_keys, "delete", access_keys_delete, "revoke an access key")
    delete.add_argument("principal")
    delete.add_argument("access_key_id")


def _crypto(group: Any) -> None:
    for name, run, text in [
        ("encrypt", encrypt, "encrypt stdin or --in (a small field, or a large file with --envelope)"),
        ("decrypt", decrypt, "decrypt stdin or --in (a ciphertext string, or an envelope with --envelope)"),
    ]:
        parser = _sub(group, name, run, text)
        if name == "encrypt":
            parser.add_argument("key", help="name or id")
        else:
            parser.add_argument("--key", help="pin the key (default: the one the ciphertext names)")
        parser.add_argument("--in", dest="input", help="input file (default: stdin)")
        parser.add_argument("--out", dest="output", help="output file (default: stdout)")
        parser.add_argument("--context", action="append", metavar="NAME=VALUE", help="encryption context entry")
        parser.add_argument("--envelope", action="store_true", help="envelope encryption (KMEV) for large data")
        parser.add_argument("--stream", action="store_true", help="large data through the service's HSM")
        parser.add_argument("--segment-size", type=int, default=DEFAULT_SEGMENT_SIZE // 1024, help="KiB (64-1024)")
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="progress bar on stderr for --envelope/--stream (default: for files of 16 MB or more on a terminal)",
        )
    for name, run, text, what in [
        ("tokenize", tokenize, "the format-preserving token of a value (FF1_AES_256 keys)", "value"),
        ("detokenize", detokenize, "the value of a token (FF1_AES_256 keys)", "token"),
    ]:
        parser = _sub(group, name, run, text)
        parser.add_argument("key", help="name or id")
        parser.add_argument(what)
        parser.add_argument("--context", action="append", metavar="NAME=VALUE", help="context entry (the tweak)")
        parser.add_argument("--out", dest="output", help="output file (default: stdout)")
        if what == "token":
            parser.add_argument("--key-version", type=int, help="default: the key's primary version")


def _audit(group: Any) -> None:
    audit = _group(group, "audit", "read and verify the audit log")
    listing = _sub(audit, "list", audit_list, "list audit records")
    listing.add_argument("--key")
    listing.add_argument("--principal")
    listing.add_argument("--action", dest="action_filter")
    listing.add_argument("--since", help="ISO 8601 time")
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument("--newest-first", action="store_true", help="the newest --limit records, newest first")
    _sub(audit, "verify", audit_verify, "verify the audit hash chain (exit 1 when broken)")


def completion(args: argparse.Namespace) -> int:
    """Print the completion script of ``args.shell``; needs no service."""
    sys.stdout.write(_completion.script(parser(), args.shell))
    return 0


def _completion_command(group: Any) -> None:
    sub = group.add_parser("completion", help="print a shell completion script (bash, zsh, fish)")
    sub.add_argument("shell", choices=_completion.SHELLS)
    sub.set_defaults(standalone=completion)


def parser() -> argparse.ArgumentParser:
    """kmctl's argument parser; ``run`` of the parsed arguments is the command (``standalone``
    for commands that need no service)."""
    root = Parser(prog="kmctl", description="Administer a keymanager service.")
    root.add_argument("--version", action="version", version=f"kmctl {__version__} (keymanager-sdk)")
    _common(root)
    root.set_defaults(json=False, standalone=None)
    group = root.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _keys(group)
    _principals(group)
    _access_keys(group)
    _crypto(group)
    _audit(group)
    _completion_command(group)
    return root
