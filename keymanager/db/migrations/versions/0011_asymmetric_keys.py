"""Asymmetric keys: a key's usage, a version's private and public key objects and public key.

``keys.usage``: the usage a key was created with (AWS ``KeyUsage``); NULL for every existing key,
whose usage its spec implies (``key_specs.implied_usage``).
``key_versions.private_label`` / ``public_label``: the labels of an asymmetric version's private and
public key objects in the HSM (NULL for symmetric versions).
``key_versions.public_key``: the version's DER SubjectPublicKeyInfo (NULL for symmetric versions).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("keys") as batch:
        batch.add_column(sa.Column("usage", sa.String(32), nullable=True))
    with op.batch_alter_table("key_versions") as batch:
        batch.add_column(sa.Column("private_label", sa.String(128), nullable=True))
        batch.add_column(sa.Column("public_label", sa.String(128), nullable=True))
        batch.add_column(sa.Column("public_key", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("key_versions") as batch:
        batch.drop_column("public_key")
        batch.drop_column("public_label")
        batch.drop_column("private_label")
    with op.batch_alter_table("keys") as batch:
        batch.drop_column("usage")
