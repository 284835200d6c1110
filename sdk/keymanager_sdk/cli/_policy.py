"""``kmctl keys policy add|remove KEY OPERATION PRINCIPAL``: change one grant of a key's policy.

A read-modify-write that cannot lose someone else's change: the key is read with its ``etag``,
the grant added or removed, and the policy written back with ``If-Match``. When the key changed
in between (412 ``precondition_failed``) it starts again from a fresh read, at most
``MAX_ATTEMPTS`` times, with a short random pause so that concurrent editors fall out of step.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from keymanager_sdk._client import KeyManager
from keymanager_sdk._exceptions import PreconditionFailed
from keymanager_sdk._models import Key
from keymanager_sdk.cli._output import emit

MAX_ATTEMPTS = 5
"""Reads and conditional writes tried before giving up on a key that keeps changing."""
RETRY_PAUSE_SECONDS = 0.05
"""Upper bound of the random pause before attempt n, times n."""


def edit_grant(client: KeyManager, key: str, operation: str, principal: str, *, grant: bool) -> Key:
    """The key after granting (or revoking) ``operation`` to ``principal``; unchanged when it already was.

    Raises ``PreconditionFailed`` when the key changed under every one of ``MAX_ATTEMPTS`` attempts,
    or any other ``APIError`` of the service (e.g. 400 for a principal that does not exist).
    """
    for attempt in range(1, MAX_ATTEMPTS + 1):
        current = client.get_key(key)
        policy = current.policy.to_json()
        names = set(policy.get(operation, ()))
        if (principal in names) == grant:
            return current
        policy[operation] = sorted(names | {principal} if grant else names - {principal})
        try:
            return client.update_key(current.id, policy=policy, if_match=current.etag)
        except PreconditionFailed:
            if attempt == MAX_ATTEMPTS:
                raise
            print(
                f"kmctl: key {key} changed meanwhile; reading it again (attempt {attempt + 1} of {MAX_ATTEMPTS})",
                file=sys.stderr,
            )
            time.sleep(random.uniform(0, RETRY_PAUSE_SECONDS * attempt))  # noqa: S311 (jitter, not cryptography)
    raise AssertionError("unreachable")


def policy_add(client: KeyManager, args: argparse.Namespace) -> int:
    """Grant OPERATION on KEY to PRINCIPAL; print the key."""
    emit(args, edit_grant(client, args.key, args.operation, args.principal, grant=True))
    return 0


def policy_remove(client: KeyManager, args: argparse.Namespace) -> int:
    """Revoke OPERATION on KEY from PRINCIPAL; print the key."""
    emit(args, edit_grant(client, args.key, args.operation, args.principal, grant=False))
    return 0
