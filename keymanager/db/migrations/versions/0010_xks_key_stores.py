"""AWS External Key Stores: the URI path prefix (unique) and AWS region of a principal of role ``xks``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("principals") as batch:
        batch.add_column(sa.Column("xks_uri_prefix", sa.String(128), nullable=True))
        batch.add_column(sa.Column("xks_region", sa.String(32), nullable=True))
        batch.create_unique_constraint("uq_principals_xks_uri_prefix", ["xks_uri_prefix"])


def downgrade() -> None:
    with op.batch_alter_table("principals") as batch:
        batch.drop_constraint("uq_principals_xks_uri_prefix", type_="unique")
        batch.drop_column("xks_region")
        batch.drop_column("xks_uri_prefix")
