"""Initial schema: principals, keys and key versions.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(128), nullable=False),
        sa.Column("cert_subject", sa.String(1024), nullable=True),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_principals"),
        sa.UniqueConstraint("name", name="uq_principals_name"),
        sa.UniqueConstraint("cert_subject", name="uq_principals_cert_subject"),
    )
    op.create_index("ix_principals_token_hash", "principals", ["token_hash"], unique=True)
    op.create_table(
        "keys",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("algorithm", sa.String(32), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column(
            "policy",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=False,
        ),
        sa.Column("primary_version", sa.Integer(), nullable=False),
        sa.Column("min_decryption_version", sa.Integer(), nullable=False),
        sa.Column("rotation_period_days", sa.Integer(), nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        _timestamp("deletion_date", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_keys"),
        sa.UniqueConstraint("name", name="uq_keys_name"),
    )
    op.create_table(
        "key_versions",
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("enc_label", sa.String(128), nullable=True),
        sa.Column("mac_label", sa.String(128), nullable=True),
        _timestamp("created_at"),
        _timestamp("destroyed_at", nullable=True),
        sa.PrimaryKeyConstraint("key_id", "version", name="pk_key_versions"),
        sa.ForeignKeyConstraint(["key_id"], ["keys.id"], name="fk_key_versions_key_id_keys"),
    )


def downgrade() -> None:
    op.drop_table("key_versions")
    op.drop_table("keys")
    op.drop_index("ix_principals_token_hash", table_name="principals")
    op.drop_table("principals")
