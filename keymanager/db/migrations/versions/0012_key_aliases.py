"""Several aliases per key (the AWS KMS API's CreateAlias, UpdateAlias, DeleteAlias, ListAliases):
every name a key answers to, its own name included, unique across keys.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "key_aliases",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_key_aliases"),
        sa.ForeignKeyConstraint(["key_id"], ["keys.id"], name="fk_key_aliases_key_id_keys", ondelete="CASCADE"),
    )
    op.create_index("ix_key_aliases_key_id", "key_aliases", ["key_id"])
    op.execute(
        "INSERT INTO key_aliases (name, key_id, created_at, updated_at)"
        " SELECT name, id, created_at, updated_at FROM keys"
    )


def downgrade() -> None:
    op.drop_index("ix_key_aliases_key_id", table_name="key_aliases")
    op.drop_table("key_aliases")
