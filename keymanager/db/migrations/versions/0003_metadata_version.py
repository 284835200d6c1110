"""Metadata version: a counter every change of a principal or a key increments.

Processes cache principals and keys and check the counter when they commit a request's
audit record, so a change made through any replica takes effect everywhere at once.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "metadata_version",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_metadata_version"),
    )
    op.bulk_insert(table, [{"id": 1, "version": 1}])


def downgrade() -> None:
    op.drop_table("metadata_version")
