"""The KMIP door: principals that may create keys they own, a key's KMIP state, exportability and
attributes, and the managed objects registered through KMIP that are not keys (stored sealed).

Revision ID: 0014
Revises: 0011 (0010 on its own branch; chained after asym-core's 0011 once merged)
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0014"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("principals") as batch:
        batch.add_column(sa.Column("create_keys", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("keys") as batch:
        batch.add_column(sa.Column("kmip_lifecycle", sa.String(32), nullable=True))
        batch.add_column(sa.Column("exportable", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("kmip_attributes", _JSON, nullable=True))
    op.create_table(
        "kmip_objects",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("object_type", sa.String(32), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("owner_id", sa.String(32), nullable=True),
        sa.Column("policy", _JSON, nullable=False),
        sa.Column("attributes", _JSON, nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=True),
        sa.Column("seal_label", sa.String(128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_kmip_objects_object_type", "kmip_objects", ["object_type"])
    op.create_index("ix_kmip_objects_owner_id", "kmip_objects", ["owner_id"])


def downgrade() -> None:
    op.drop_index("ix_kmip_objects_owner_id", table_name="kmip_objects")
    op.drop_index("ix_kmip_objects_object_type", table_name="kmip_objects")
    op.drop_table("kmip_objects")
    with op.batch_alter_table("keys") as batch:
        batch.drop_column("kmip_attributes")
        batch.drop_column("exportable")
        batch.drop_column("kmip_lifecycle")
    with op.batch_alter_table("principals") as batch:
        batch.drop_column("create_keys")
