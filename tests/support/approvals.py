"""Dual control on a shared server (issue 40): a second admin that approves, the request id a door's
pending answer names, and per-key rules (a shared server's other tests see no rule of the service)."""

from __future__ import annotations

import re
import secrets
from typing import Any

from tests.e2e.conftest import Server

PENDING = re.compile(r"approval pending: request (?P<id>[0-9a-f]{32})")
"""How every door's pending answer names the request (its message, ``errors.ApprovalPending``)."""


def request_id_in(message: str) -> str:
    """The approval request a door's refusal message names."""
    found = PENDING.search(message)
    assert found is not None, message
    return found["id"]


def guard_key(server: Server, key: str, rules: dict[str, Any]) -> None:
    """Give key ``key`` its own approval rules (through REST, as the server's admin)."""
    with server.client(server.admin_token) as admin:
        answer = admin.put(f"/v1/keys/{key}/approval-rules", json={"rules": rules})
        assert answer.status_code == 200, answer.text


def approver(server: Server) -> str:
    """The token of a new admin of ``server``: it approves what others asked for."""
    with server.client(server.admin_token) as admin:
        made = admin.post("/v1/principals", json={"name": f"approver-{secrets.token_hex(4)}", "role": "admin"})
        assert made.status_code == 201, made.text
        return str(made.json()["token"])


def approve(server: Server, token: str, request_id: str) -> dict[str, Any]:
    """Inspect the request and approve it by its digest, as the admin of ``token``; the request after."""
    with server.client(token) as admin:
        shown = admin.get(f"/v1/approvals/{request_id}")
        assert shown.status_code == 200, shown.text
        answer = admin.post(f"/v1/approvals/{request_id}/approve", json={"digest": shown.json()["digest"]})
        assert answer.status_code == 200, answer.text
        return dict(answer.json())


def state_of(server: Server, key: str) -> str:
    with server.client(server.admin_token) as admin:
        return str(admin.get(f"/v1/keys/{key}").json()["state"])
