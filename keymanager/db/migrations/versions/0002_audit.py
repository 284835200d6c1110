"""Audit log: hash-chained records and the chain head.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GENESIS_HASH = "0" * 64


def upgrade() -> None:
    op.create_table(
        "audit_records",
        sa.Column("seq", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("principal", sa.String(128), nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=True),
        sa.Column("key_version", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(64), nullable=True),
        sa.Column("details", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_audit_records"),
    )
    op.create_index("ix_audit_records_time", "audit_records", ["time"])
    op.create_index("ix_audit_records_principal", "audit_records", ["principal"])
    op.create_index("ix_audit_records_key_id", "audit_records", ["key_id"])
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_head"),
    )
    op.bulk_insert(head, [{"id": 1, "last_seq": 0, "last_hash": GENESIS_HASH}])


def downgrade() -> None:
    op.drop_table("audit_head")
    op.drop_index("ix_audit_records_key_id", "audit_records")
    op.drop_index("ix_audit_records_principal", "audit_records")
    op.drop_index("ix_audit_records_time", "audit_records")
    op.drop_table("audit_records")
