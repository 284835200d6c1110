"""HSM orphans: token objects no key version names, with the time each was first seen so.

The maintenance task destroys such an object once it has been unreferenced for a grace
period (a crash between the HSM's create and the database's commit leaves one), and marks
the row destroyed in the transaction of its audit record, so one process records it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "hsm_orphans",
        sa.Column("label", sa.String(128), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("destroyed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("label", name="pk_hsm_orphans"),
    )


def downgrade() -> None:
    op.drop_table("hsm_orphans")
