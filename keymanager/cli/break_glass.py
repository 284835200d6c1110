"""``keymanager approvals``: the operator's way out of dual control when approvers are lost.

Run on the service's host: it needs the database and the HSM PIN (as ``keymanager audit verify``
does), which no network caller has. Every use is in the sealed audit chain as ``approval.break_glass``
with the reason given, naming the principal ``break-glass``.
"""

from __future__ import annotations

import argparse

from keymanager.config import Settings


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``keymanager approvals break-glass ID --reason R`` and ``approvals clear-rules --reason R``."""
    approvals = commands.add_parser("approvals", help="dual control's way out when approvers are lost (audited)")
    verbs = approvals.add_subparsers(dest="approvals_command", required=True)
    glass = verbs.add_parser("break-glass", help="approve a pending approval request at once, as break-glass")
    glass.add_argument("request_id", help="the approval request's id (a guarded call's 202 names it)")
    glass.add_argument("--reason", required=True, help="why (kept in the audit record, at most 200 characters)")
    clear = verbs.add_parser("clear-rules", help="remove the service's approval rules (a key's own rules stay)")
    clear.add_argument("--reason", required=True, help="why (kept in the audit record, at most 200 characters)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Carry out ``args.approvals_command``; exit 0, or 1 (said why) when the request is not pending."""
    from keymanager.services.container import Services

    services = Services.build(settings)
    try:
        if args.approvals_command == "break-glass":
            approved = services.approvals.break_glass(args.request_id, args.reason)
            print(f"approval request {approved.id} approved by break-glass: its requester may send the call again")
        else:
            services.approvals.clear_rules(args.reason)
            print("the service's approval rules are removed (recorded in the audit chain)")
    finally:
        services.close()
    return 0
