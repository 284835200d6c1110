"""kmctl's sub-commands: the argument parser, and one small function per command.

Each command function takes the client and the parsed arguments, prints its result and
returns the exit code; errors propagate to ``kmctl.main``, which prints them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from keymanager_sdk._client import KeyManager
from keymanager_sdk._envelope import DEFAULT_SEGMENT_SIZE
from keymanager_sdk.cli._output import show

Command = Callable[[KeyManager, argparse.Namespace], int]


def _print(args: argparse.Namespace, value: Any) -> int:
    show(value, args.json, sys.stdout)
    return 0


def _context(args: argparse.Namespace) -> dict[str, str] | None:
    pairs = args.context or []
    if not pairs:
        return None
    if any("=" not in p for p in pairs):
        raise ValueError("--context takes NAME=VALUE")
    return dict(p.split("=", 1) for p in pairs)


def _policy(text: str | None, option: str = "--policy") -> dict[str, Any] | None:
    if text is None:
        return None
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"{option} must be a JSON object")
    return value


def _input(args: argparse.Namespace) -> BinaryIO:
    return open(args.input, "rb") if args.input else sys.stdin.buffer


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
    if args.envelope:
        return _envelope(client, args, encrypting=True)
    with _input(args) as src:
        result = client.encrypt_with_version(args.key, src.read(), _context(args))
    if args.json:
        return _print(args, result)
    _write_output(args, result.ciphertext.encode() + b"\n")
    return 0


def decrypt(client: KeyManager, args: argparse.Namespace) -> int:
    if args.envelope:
        return _envelope(client, args, encrypting=False)
    with _input(args) as src:
        ciphertext = src.read().decode("ascii").strip()
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


def _envelope(client: KeyManager, args: argparse.Namespace, encrypting: bool) -> int:
    context = _context(args)
    if args.input and args.output:
        if encrypting:
            client.encrypt_file(args.key, args.input, args.output, context, args.segment_size * 1024)
        else:
            client.decrypt_file(args.input, args.output, context)
        return 0
    with _input(args) as src:
        dst = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115
        try:
            if encrypting:
                client.encrypt_stream(args.key, src, dst, context, args.segment_size * 1024)
            else:
                client.decrypt_stream(src, dst, context)
        finally:
            dst.flush()
            if args.output:
                dst.close()
    return 0


# --- audit ---------------------------------------------------------------------------------------


def audit_list(client: KeyManager, args: argparse.Namespace) -> int:
    records = client.audit(
        key=args.key, principal=args.principal, since=args.since, limit=args.limit, action=args.action_filter
    )
    return _print(args, records)


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
    parser: argparse.ArgumentParser = group.add_parser(name, help=help_text, description=help_text)
    _common(parser)
    parser.set_defaults(run=run)
    return parser


def _keys(group: Any) -> None:
    keys = group.add_parser("keys", help="manage keys").add_subparsers(dest="action", required=True)
    create = _sub(keys, "create", keys_create, "create a key")
    create.add_argument("name")
    create.add_argument("--algorithm", choices=["AES_256_CBC_HMAC_SHA256", "AES_256_GCM", "HMAC_SHA256", "FF1_AES_256"])
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


def _principals(group: Any) -> None:
    principals = group.add_parser("principals", help="manage principals").add_subparsers(dest="action", required=True)
    create = _sub(principals, "create", principals_create, "create a principal (prints its token once)")
    create.add_argument("name")
    create.add_argument("--role", required=True, choices=["admin", "app", "auditor"])
    create.add_argument("--cert-subject", help="RFC 4514 subject of its TLS client certificate")
    _sub(principals, "list", lambda c, a: _print(a, c.list_principals()), "list principals")
    _sub(principals, "delete", principals_delete, "delete a principal").add_argument("name")


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
        parser.add_argument("--segment-size", type=int, default=DEFAULT_SEGMENT_SIZE // 1024, help="KiB (64-1024)")
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
    audit = group.add_parser("audit", help="read and verify the audit log").add_subparsers(dest="action", required=True)
    listing = _sub(audit, "list", audit_list, "list audit records")
    listing.add_argument("--key")
    listing.add_argument("--principal")
    listing.add_argument("--action", dest="action_filter")
    listing.add_argument("--since", help="ISO 8601 time")
    listing.add_argument("--limit", type=int, default=100)
    _sub(audit, "verify", audit_verify, "verify the audit hash chain (exit 1 when broken)")


def parser() -> argparse.ArgumentParser:
    """kmctl's argument parser; ``run`` of the parsed arguments is the command."""
    root = argparse.ArgumentParser(prog="kmctl", description="Administer a keymanager service.")
    _common(root)
    root.set_defaults(json=False)
    group = root.add_subparsers(dest="command", required=True)
    _keys(group)
    _principals(group)
    _crypto(group)
    _audit(group)
    return root
