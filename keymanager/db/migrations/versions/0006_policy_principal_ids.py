"""Key policies name principals by id instead of by name.

A principal created under a deleted one's name must inherit nothing, so every stored policy
is rewritten: each name becomes the id of the principal of that name. Names of principals
that no longer exist are dropped, and so are auditors (who may not be named in a policy any
more: they read the audit log and never use a key). The downgrade turns ids back into names
(dropping ids of principals that no longer exist).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPERATIONS = ("encrypt", "decrypt", "generate_data_key", "reencrypt", "mac")
_KEYS = sa.table(
    "keys",
    sa.column("id", sa.String(32)),
    sa.column("policy", sa.JSON().with_variant(postgresql.JSONB(), "postgresql")),
)
_PRINCIPALS = sa.table("principals", sa.column("id", sa.String(32)), sa.column("name"), sa.column("role"))


def upgrade() -> None:
    rows = op.get_bind().execute(sa.select(_PRINCIPALS.c.id, _PRINCIPALS.c.name, _PRINCIPALS.c.role))
    _rewrite({name: id_ for id_, name, role in rows if role != "auditor"})


def downgrade() -> None:
    rows = op.get_bind().execute(sa.select(_PRINCIPALS.c.id, _PRINCIPALS.c.name))
    _rewrite({id_: name for id_, name in rows})


def _rewrite(references: Mapping[str, str]) -> None:
    """Replace every principal reference of every policy by ``references[it]``, dropping the rest."""
    connection = op.get_bind()
    for key_id, policy in connection.execute(sa.select(_KEYS.c.id, _KEYS.c.policy)).all():
        rewritten = _translated(policy, references)
        if rewritten != policy:
            connection.execute(_KEYS.update().where(_KEYS.c.id == key_id).values(policy=rewritten))


def _translated(policy: Mapping[str, Any], references: Mapping[str, str]) -> dict[str, Any]:
    out = dict(policy)
    for operation in _OPERATIONS:
        if isinstance(policy.get(operation), list):
            out[operation] = sorted({references[p] for p in policy[operation] if p in references})
    return out
