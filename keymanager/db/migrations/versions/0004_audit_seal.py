"""Audit chain keyed by the HSM: a ``seal`` column on audit records.

The last record of every append carries the HMAC-SHA256, computed in the HSM with the audit
key, of its sequence number and chain value (see :mod:`keymanager.domain.audit`). Records
written before this revision have no seal: the service verifies them as a plain SHA-256 chain
when it first starts on the migrated database and continues the chain keyed from a marker
record (action ``audit.chain.keyed``) whose seal covers them all. No HSM is needed here.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_records") as batch:
        batch.add_column(sa.Column("seal", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_records") as batch:
        batch.drop_column("seal")
