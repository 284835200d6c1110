"""Token format and origin of keys.

``token_format``: the FF1 token format of an ``FF1_AES_256`` key (NULL for every other key).
``origin``: ``hsm`` (versions generated in the HSM; every existing key) or ``external`` (imported).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("keys") as batch:
        batch.add_column(sa.Column("token_format", sa.JSON().with_variant(postgresql.JSONB(), "postgresql")))
        batch.add_column(sa.Column("origin", sa.String(16), nullable=False, server_default="hsm"))


def downgrade() -> None:
    with op.batch_alter_table("keys") as batch:
        batch.drop_column("origin")
        batch.drop_column("token_format")
