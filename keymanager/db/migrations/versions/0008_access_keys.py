"""Access keys of the AWS KMS API: secrets sealed under an HSM key, per principal.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "access_keys",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("principal_id", sa.String(32), nullable=False),
        sa.Column("sealed_secret", sa.LargeBinary(), nullable=False),
        sa.Column("wrap_label", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_access_keys"),
        sa.ForeignKeyConstraint(
            ["principal_id"], ["principals.id"], name="fk_access_keys_principal_id_principals", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_access_keys_principal_id", "access_keys", ["principal_id"])


def downgrade() -> None:
    op.drop_index("ix_access_keys_principal_id", table_name="access_keys")
    op.drop_table("access_keys")
