"""Tags of keys (the AWS KMS API's TagResource, UntagResource, ListResourceTags, CreateKey Tags).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "key_tags",
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("tag_key", sa.String(128), nullable=False),
        sa.Column("tag_value", sa.String(256), nullable=False),
        sa.PrimaryKeyConstraint("key_id", "tag_key", name="pk_key_tags"),
        sa.ForeignKeyConstraint(["key_id"], ["keys.id"], name="fk_key_tags_key_id_keys", ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("key_tags")
