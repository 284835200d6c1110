"""Dual control: approval rules (the service's and each key's) and approval requests (issue 40).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "approval_rules",
        sa.Column("scope", sa.String(32), primary_key=True),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "approval_requests",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("operations", sa.JSON(), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=True),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("requester_id", sa.String(32), nullable=False),
        sa.Column("requester", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("approvals_required", sa.Integer(), nullable=False),
        sa.Column("approvers", sa.JSON(), nullable=True),
        sa.Column("votes", sa.JSON(), nullable=False),
        sa.Column("vote_count", sa.Integer(), nullable=False),
        sa.Column("denial", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("executed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_approval_requests_digest", "approval_requests", ["digest"])
    op.create_index("ix_approval_requests_requester_id", "approval_requests", ["requester_id"])
    op.create_index("ix_approval_requests_state", "approval_requests", ["state"])
    op.create_index("ix_approval_requests_expires_at", "approval_requests", ["expires_at"])


def downgrade() -> None:
    op.drop_table("approval_requests")
    op.drop_table("approval_rules")
