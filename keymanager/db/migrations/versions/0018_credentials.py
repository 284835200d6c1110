"""Credentials as a table of kinds (issue 34 item 4): ``credentials`` holds each principal's
credentials looked up by name (kind, name, principal, facts), back-filled from the columns
``principals.cert_subject`` (kind ``certificate_subject``) and ``principals.xks_uri_prefix`` with
``xks_region`` (kind ``xks_uri_prefix``, the region a fact).

The columns stay, still written beside the rows, so replicas of the previous version keep serving
during a rolling upgrade; a later release drops them (``db/principal_credentials.py``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")
_PRINCIPALS = sa.table(
    "principals",
    sa.column("id", sa.String()),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("cert_subject", sa.String()),
    sa.column("xks_uri_prefix", sa.String()),
    sa.column("xks_region", sa.String()),
)
_CREDENTIALS = sa.table(
    "credentials",
    sa.column("kind", sa.String()),
    sa.column("name", sa.String()),
    sa.column("principal_id", sa.String()),
    sa.column("facts", _JSON),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    op.create_table(
        "credentials",
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("name", sa.String(1024), nullable=False),
        sa.Column("principal_id", sa.String(32), sa.ForeignKey("principals.id", ondelete="CASCADE"), nullable=False),
        sa.Column("facts", _JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", "name", name="pk_credentials"),
    )
    op.create_index("ix_credentials_principal_id", "credentials", ["principal_id"])
    rows = _backfill(op.get_bind())
    if rows:
        op.bulk_insert(_CREDENTIALS, rows)


def _backfill(connection: sa.Connection) -> list[dict[str, Any]]:
    """The credentials rows of the principals' columns, as of now."""
    rows: list[dict[str, Any]] = []
    for row in connection.execute(sa.select(_PRINCIPALS)):
        base = {"principal_id": row.id, "created_at": row.created_at}
        if row.cert_subject is not None:
            rows.append({**base, "kind": "certificate_subject", "name": row.cert_subject, "facts": None})
        if row.xks_uri_prefix is not None:
            facts = None if row.xks_region is None else {"region": row.xks_region}
            rows.append({**base, "kind": "xks_uri_prefix", "name": row.xks_uri_prefix, "facts": facts})
    return rows


def downgrade() -> None:
    op.drop_table("credentials")
