"""``kmctl access-keys create|list|delete PRINCIPAL``: access keys of the AWS KMS API; ``kmctl approle
create|list|delete PRINCIPAL``: AppRole credentials of the Vault Transit API (``create`` prints the
``secret_id`` this once).

``create`` prints the new pair, its secret this once (``--access-key-id`` with
``--secret-stdin`` registers a given pair instead: the secret is read from stdin, never from
the command line, where other users of the machine could see it); ``list`` prints ids and
creation times; ``delete`` revokes one key at once.
"""

from __future__ import annotations

import argparse
import sys

from keymanager_sdk._client import KeyManager
from keymanager_sdk.cli._config import UsageError
from keymanager_sdk.cli._output import emit


def access_keys_create(client: KeyManager, args: argparse.Namespace) -> int:
    """Create (or register) an access key of PRINCIPAL; print it with its secret."""
    if (args.access_key_id is not None) != args.secret_stdin:
        raise UsageError("--access-key-id and --secret-stdin go together")
    secret = sys.stdin.readline().strip() if args.secret_stdin else None
    if args.secret_stdin and not secret:
        raise UsageError("--secret-stdin: no secret on stdin")
    emit(args, client.create_access_key(args.principal, args.access_key_id, secret))
    return 0


def access_keys_list(client: KeyManager, args: argparse.Namespace) -> int:
    """Print the ids and creation times of PRINCIPAL's access keys."""
    emit(args, client.list_access_keys(args.principal), "access keys")
    return 0


def access_keys_delete(client: KeyManager, args: argparse.Namespace) -> int:
    """Revoke access key ACCESS_KEY_ID of PRINCIPAL."""
    client.delete_access_key(args.principal, args.access_key_id)
    return 0


def approle_create(client: KeyManager, args: argparse.Namespace) -> int:
    """Create an AppRole credential of PRINCIPAL; print its role id and secret id."""
    emit(args, client.create_approle(args.principal))
    return 0


def approle_list(client: KeyManager, args: argparse.Namespace) -> int:
    """Print the role ids and creation times of PRINCIPAL's AppRole credentials."""
    emit(args, client.list_approles(args.principal), "AppRole credentials")
    return 0


def approle_delete(client: KeyManager, args: argparse.Namespace) -> int:
    """Delete AppRole credential ROLE_ID of PRINCIPAL (and its client tokens)."""
    client.delete_approle(args.principal, args.role_id)
    return 0
