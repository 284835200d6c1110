"""Audit chains: one per writer, no head shared by every writer.

``audit_head`` (the one head every append locked) becomes the table ``audit_chains``: a row per
chain, with its kind (``writer``: one audit writer process's group commits; ``changes``: the
records written inside the transactions of changes), who opened it, when, and its head. The
single chain so far becomes chain 1, a ``changes`` chain, and goes on as one chain among the
others; its records keep their sequence numbers, hashes and seals. Audit records get their
chain (``chain_id``, part of the primary key with ``seq``) and their ``position`` in the whole
log, which listings follow (on PostgreSQL taken from the sequence ``audit_position`` at insert).

Revision ID: 0013
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    chains = op.create_table(
        "audit_chains",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("writer", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_chains"),
    )
    head = op.get_bind().execute(sa.text("SELECT last_seq, last_hash FROM audit_head WHERE id = 1")).one()
    op.bulk_insert(
        chains,
        [
            {
                "id": 1,
                "kind": "changes",
                "writer": "the single chain before migration 0013",
                "created_at": datetime.now(UTC),
                "last_seq": head.last_seq,
                "last_hash": head.last_hash,
            }
        ],
    )
    op.drop_table("audit_head")
    with op.batch_alter_table("audit_records") as batch:
        batch.add_column(sa.Column("chain_id", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("position", sa.BigInteger(), nullable=True))
    op.execute("UPDATE audit_records SET position = seq")
    with op.batch_alter_table("audit_records") as batch:
        batch.alter_column("position", existing_type=sa.BigInteger(), nullable=False)
        batch.alter_column("chain_id", existing_type=sa.Integer(), server_default=None)
        batch.drop_constraint("pk_audit_records", type_="primary")
        batch.create_primary_key("pk_audit_records", ["chain_id", "seq"])
        batch.create_index("ix_audit_records_position", ["position"], unique=True)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE SEQUENCE audit_position")
        op.execute("SELECT setval('audit_position', COALESCE((SELECT max(position) FROM audit_records), 0) + 1, false)")
        op.execute("SELECT setval('audit_chains_id_seq', 2, false)")


def downgrade() -> None:
    """Back to one chain: only while chain 1 is the only chain holding records."""
    others = op.get_bind().execute(sa.text("SELECT count(*) FROM audit_records WHERE chain_id <> 1")).scalar_one()
    if others:
        raise RuntimeError("audit records of other chains than chain 1 exist: the single chain cannot hold them")
    head = op.get_bind().execute(sa.text("SELECT last_seq, last_hash FROM audit_chains WHERE id = 1")).one()
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP SEQUENCE audit_position")
    with op.batch_alter_table("audit_records") as batch:
        batch.drop_index("ix_audit_records_position")
        batch.drop_constraint("pk_audit_records", type_="primary")
        batch.create_primary_key("pk_audit_records", ["seq"])
        batch.drop_column("position")
        batch.drop_column("chain_id")
    op.drop_table("audit_chains")
    audit_head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_head"),
    )
    op.bulk_insert(audit_head, [{"id": 1, "last_seq": head.last_seq, "last_hash": head.last_hash}])
