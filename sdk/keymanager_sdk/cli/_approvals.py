"""``kmctl approvals list|show|approve|deny|rules``: dual control, the approval requests that hold
guarded calls and the rules that decide which calls are held.

``approve ID`` reads the request, prints on stderr what will run and its digest, then approves
that digest, so what is approved is what was shown; ``--digest D`` (a digest seen elsewhere, e.g.
in the requester's message) insists: when the request's digest is not ``D``, nothing is approved
(exit 1). ``rules [--key K]`` prints the service's rules (a key's own with ``--key``); ``rules set
RULES [--key K]`` replaces them with ``RULES``, JSON or ``@file.json``, in the shape ``rules -o
json`` prints (``{"key.delete": {"approvals": 2, "approvers": null, "ttl_hours": 24}}``; also
accepted wrapped as the API's ``{"rules": {…}}``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from keymanager_sdk._approvals import DENIAL_REASON_MAX, Approval
from keymanager_sdk._client import KeyManager
from keymanager_sdk.cli._commands import json_object
from keymanager_sdk.cli._config import UsageError
from keymanager_sdk.cli._output import emit

RULES_EXAMPLE = '{"key.delete": {"approvals": 2}}'
DIGEST = re.compile(r"[0-9a-f]{64}")
"""A request's digest: SHA-256 in lowercase hex."""


class DigestMismatch(ValueError):
    """The request's digest is not the one ``--digest`` insists on: nothing was approved (exit 1)."""


def approvals_list(client: KeyManager, args: argparse.Namespace) -> int:
    """Print the approval requests (those in ``--state``)."""
    return emit(args, client.list_approvals(args.state), "approval requests")


def approvals_show(client: KeyManager, args: argparse.Namespace) -> int:
    """Print one request: operations, target, arguments, digest, requester, state, votes, expiry."""
    return emit(args, client.get_approval(args.request_id))


def _what_will_run(request: Approval) -> str:
    votes = ", ".join(vote.principal for vote in request.approvals) or "none yet"
    return (
        f"kmctl: request {request.id} ({request.state}) of {request.requester} runs "
        f"{', '.join(request.operations)} on {request.target}\n"
        f"  arguments: {json.dumps(request.arguments, sort_keys=True)}\n"
        f"  digest:    {request.digest}\n"
        f"  approvals: {len(request.approvals)} of {request.approvals_required} ({votes}); "
        f"expires {request.expires_at.isoformat()}"
    )


def approvals_approve(client: KeyManager, args: argparse.Namespace) -> int:
    """Approve request ID with the digest just read (``--digest``: only if it is that one); print the request."""
    insisted = None if args.digest is None else args.digest.strip().lower()
    if insisted is not None and not DIGEST.fullmatch(insisted):
        raise UsageError(f"--digest {args.digest!r} is not a SHA-256 in hex (64 characters)")
    request = client.get_approval(args.request_id)
    print(_what_will_run(request), file=sys.stderr)
    if insisted is not None and insisted != request.digest.lower():
        raise DigestMismatch(
            f"request {request.id} has digest {request.digest}, not the --digest {insisted} given: "
            "the call it holds is not the one you saw; nothing was approved"
        )
    return emit(args, client.approve(request.id, request.digest))


def approvals_deny(client: KeyManager, args: argparse.Namespace) -> int:
    """Deny request ID (``--reason``); print the request."""
    if args.reason is not None and len(args.reason) > DENIAL_REASON_MAX:
        raise UsageError(f"--reason is over {DENIAL_REASON_MAX} characters")
    return emit(args, client.deny(args.request_id, args.reason))


def rules_show(client: KeyManager, args: argparse.Namespace) -> int:
    """Print the service's rules (``--key``: the key's own), by guarded operation."""
    rules = client.get_approval_rules(args.key)
    if not rules:
        note = "no operation waits for approval" if args.key is None else f"none of key {args.key}'s own"
        print(f"kmctl: no approval rules ({note})", file=sys.stderr)
    return emit(args, rules)


def rules_set(client: KeyManager, args: argparse.Namespace) -> int:
    """Replace the service's rules (``--key``: the key's own) with RULES; print the rules after."""
    rules = json_object(args.rules, "RULES", RULES_EXAMPLE) or {}
    if set(rules) == {"rules"} and isinstance(rules["rules"], dict):
        rules = rules["rules"]
    wrong = sorted(op for op, rule in rules.items() if not isinstance(rule, dict))
    if wrong:
        raise UsageError(f"RULES: the rule of {', '.join(wrong)} must be a JSON object, e.g. {RULES_EXAMPLE}")
    return emit(args, client.set_approval_rules(rules, args.key))
