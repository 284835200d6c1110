"""The Vault Transit door: a key's Transit settings, AppRole credentials and the client tokens their
logins made (only hashes of secrets and tokens are stored).

Revision ID: 0015
Revises: 0014
Create Date: 2027-01-10
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "transit_keys",
        sa.Column("key_id", sa.String(32), sa.ForeignKey("keys.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("deletion_allowed", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("min_encryption_version", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_table(
        "approle_credentials",
        sa.Column("role_id", sa.String(64), primary_key=True),
        sa.Column("principal_id", sa.String(32), sa.ForeignKey("principals.id", ondelete="CASCADE"), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("secret_hash", name="uq_approle_credentials_secret_hash"),
    )
    op.create_index("ix_approle_credentials_principal_id", "approle_credentials", ["principal_id"])
    op.create_table(
        "approle_tokens",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("principal_id", sa.String(32), sa.ForeignKey("principals.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "role_id",
            sa.String(64),
            sa.ForeignKey("approle_credentials.role_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_approle_tokens_principal_id", "approle_tokens", ["principal_id"])
    op.create_index("ix_approle_tokens_role_id", "approle_tokens", ["role_id"])
    op.create_index("ix_approle_tokens_expires_at", "approle_tokens", ["expires_at"])


def downgrade() -> None:
    op.drop_table("approle_tokens")
    op.drop_table("approle_credentials")
    op.drop_table("transit_keys")
