"""kmctl's commands about keys, principals, the audit log and the caller: one small function each.

Each command function takes the client and the parsed arguments, prints its result and
returns the exit code; errors propagate to ``kmctl.main``, which prints them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keymanager_sdk._client import KeyManager
from keymanager_sdk._exceptions import Forbidden
from keymanager_sdk.cli._config import UsageError
from keymanager_sdk.cli._output import audit_rows, emit

Command = Callable[[KeyManager, argparse.Namespace], int]


def json_object(
    text: str | None, option: str = "--policy", example: str = '{"encrypt": ["billing"]}'
) -> dict[str, Any] | None:
    """The JSON object of ``text`` (or of the file ``@path``); ``UsageError`` naming the option or file
    (and showing ``example`` when the JSON is not an object)."""
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
        raise UsageError(f"{option} must be a JSON object, e.g. {example}")
    return value


def _read_file(path: str, option: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from exc


# --- keys ----------------------------------------------------------------------------------------


def keys_create(client: KeyManager, args: argparse.Namespace) -> int:
    if args.token_format is not None or args.algorithm == "FF1_AES_256":
        fmt = json_object(args.token_format or "{}", "--token-format")
        return emit(args, client.create_token_key(args.name, fmt or {}, json_object(args.policy), args.description))
    key = client.create_key(
        args.name,
        args.algorithm,
        args.description,
        json_object(args.policy),
        args.rotation_period_days,
        origin=args.origin,
        usage=args.usage,
    )
    return emit(args, key)


def keys_update(client: KeyManager, args: argparse.Namespace) -> int:
    key = client.update_key(
        args.key,
        description=args.description,
        policy=json_object(args.policy),
        min_decryption_version=args.min_decryption_version,
    )
    return emit(args, key)


def keys_delete(client: KeyManager, args: argparse.Namespace) -> int:
    return emit(args, client.schedule_key_deletion(args.key, args.pending_days))


def keys_import(client: KeyManager, args: argparse.Namespace) -> int:
    """Import the material of ``--material`` (and ``--mac-material``) into a key of origin
    ``external``: import parameters, wrapping here, import. The material never leaves in clear."""
    material = _read_file(args.material, "--material")
    mac_material = None if args.mac_material is None else _read_file(args.mac_material, "--mac-material")
    return emit(args, client.import_key_material(args.key, material, mac_material, args.wrapping_algorithm))


def key_action(method: str) -> Command:
    """A command calling ``client.<method>(args.key)`` and printing the key."""

    def run(client: KeyManager, args: argparse.Namespace) -> int:
        return emit(args, getattr(client, method)(args.key))

    return run


# --- principals ----------------------------------------------------------------------------------


def principals_create(client: KeyManager, args: argparse.Namespace) -> int:
    made = client.create_principal(
        args.name, args.role, args.cert_subject, create_keys=args.create_keys, key_store=args.key_store
    )
    return emit(args, made)


def principals_delete(client: KeyManager, args: argparse.Namespace) -> int:
    client.delete_principal(args.name)
    return 0


def whoami(client: KeyManager, args: argparse.Namespace) -> int:
    """The principal kmctl's credential belongs to."""
    return emit(args, client.whoami())


# --- audit ---------------------------------------------------------------------------------------


def audit_list(client: KeyManager, args: argparse.Namespace) -> int:
    """The ``--limit`` newest records, newest first (``--order asc``: the oldest, oldest first);
    keys shown by name where the caller may see them."""
    filters = {"key": args.key, "principal": args.principal, "since": args.since, "action": args.action_filter}
    records = client.audit(**filters, limit=args.limit, newest_first=args.order == "desc")
    try:
        names = {key.id: key.name for key in client.list_keys()} if records else {}
    except Forbidden:
        names = {}
    return emit(args, audit_rows(records, names), "audit records")


def audit_verify(client: KeyManager, args: argparse.Namespace) -> int:
    result = client.verify_audit()
    emit(args, result)
    return 0 if result.ok else 1
