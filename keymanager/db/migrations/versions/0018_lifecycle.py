"""The core's names for a key's lifecycle and attributes: ``keys.kmip_lifecycle`` becomes
``lifecycle`` and ``keys.kmip_attributes`` becomes ``attributes`` (KMIP is one door onto them; the
values are kept as they are) (issue 34 item 3).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")
_RENAMED = (("kmip_lifecycle", "lifecycle", sa.String(32)), ("kmip_attributes", "attributes", _JSON))
"""Each renamed column of ``keys``: its old name, its new name, its type."""


def upgrade() -> None:
    with op.batch_alter_table("keys") as batch:
        for old, new, kind in _RENAMED:
            batch.alter_column(old, new_column_name=new, existing_type=kind, existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("keys") as batch:
        for old, new, kind in _RENAMED:
            batch.alter_column(new, new_column_name=old, existing_type=kind, existing_nullable=True)
