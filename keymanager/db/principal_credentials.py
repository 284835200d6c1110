"""A principal's credentials of the kinds stored by name (``domain/credential_kinds.py``
``Storage.CREDENTIALS``: certificate subjects, XKS URI prefixes with their region) as the store
writes and reads them: rows of the ``credentials`` table.

Rolling upgrades (migration ``0018``). Replicas of the previous version keep serving beside this
one, on the same database, and know only the columns ``principals.cert_subject``,
``xks_uri_prefix`` and ``xks_region``. Until a later release drops those columns:

- a new principal's credentials are written twice, in its one transaction: its rows and the
  columns (:func:`legacy_columns`), so an older replica still authenticates it; the columns'
  unique constraints keep each name unique across versions;
- a principal an older replica created after ``0018`` ran has the columns only: where a principal
  has no row of a kind, its column is read instead (:data:`_LEGACY`, the one place the columns are
  read). A principal's credentials never change once it exists, so the row and the column never
  disagree.

This module is the only one that knows the columns: :data:`_LEGACY` and :func:`legacy_columns` go
away with them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, exists, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from keymanager.db.models import CredentialRow, PrincipalRow
from keymanager.domain.credential_kinds import (
    CERTIFICATE_SUBJECT,
    XKS_URI_PREFIX,
    CredentialKind,
    Held,
    held_by,
)
from keymanager.domain.models import Principal

_LEGACY: dict[str, tuple[InstrumentedAttribute[Any], dict[str, InstrumentedAttribute[Any]]]] = {
    CERTIFICATE_SUBJECT.name: (PrincipalRow.cert_subject, {}),
    XKS_URI_PREFIX.name: (PrincipalRow.xks_uri_prefix, {"region": PrincipalRow.xks_region}),
}
"""Each kind's legacy column on ``principals`` and its facts' columns (going away, see above)."""


def rows_of(principal: Principal, created_at: datetime) -> list[CredentialRow]:
    """The ``credentials`` rows of a new ``principal``."""
    return [
        CredentialRow(
            kind=kind,
            name=credential.name,
            principal_id=principal.id,
            facts=dict(credential.facts) or None,
            created_at=created_at,
        )
        for kind, credential in held_by(principal).items()
    ]


def legacy_columns(principal: Principal) -> dict[str, str | None]:
    """The values of the legacy columns of a new ``principal``'s row (still written: see above)."""
    held = held_by(principal)
    values: dict[str, str | None] = {}
    for kind, (column, facts) in _LEGACY.items():
        credential = held.get(kind)
        values[column.key] = None if credential is None else credential.name
        for fact, fact_column in facts.items():
            values[fact_column.key] = None if credential is None else credential.facts.get(fact)
    return values


def held(row: PrincipalRow) -> dict[str, Held]:
    """The credentials the principal of ``row`` holds, by kind name: its rows, else its legacy columns."""
    found = {credential.kind: Held(credential.name, credential.facts or {}) for credential in row.credentials}
    for kind, (column, facts) in _LEGACY.items():
        name = getattr(row, column.key)
        if kind not in found and name is not None:
            values = {fact: getattr(row, c.key) for fact, c in facts.items()}
            found[kind] = Held(name, {fact: value for fact, value in values.items() if value is not None})
    return found


def holder(session: Session, kind: CredentialKind, name: str) -> PrincipalRow | None:
    """The row of the principal holding the credential ``name`` of ``kind``, if any: its row, else
    (a principal an older replica made) its legacy column."""
    statement = (
        select(PrincipalRow)
        .join(CredentialRow, CredentialRow.principal_id == PrincipalRow.id)
        .where(CredentialRow.kind == kind.name, CredentialRow.name == name)
    )
    found = session.scalars(statement).one_or_none()
    if found is None:
        column, _ = _LEGACY[kind.name]
        found = session.scalars(select(PrincipalRow).where(column == name)).one_or_none()
    return found


def names(connection: Connection, kind: CredentialKind, limit: int) -> list[str]:
    """At most ``limit`` names of stored credentials of ``kind``: rows, then legacy columns of
    principals without a row of the kind."""
    statement = select(CredentialRow.name).where(CredentialRow.kind == kind.name).limit(limit)
    found = [str(name) for name in connection.execute(statement).scalars()]
    if len(found) < limit:
        column, _ = _LEGACY[kind.name]
        has_row = exists().where(CredentialRow.principal_id == PrincipalRow.id, CredentialRow.kind == kind.name)
        legacy = select(column).where(column.is_not(None), ~has_row).limit(limit - len(found))
        found += [str(name) for name in connection.execute(legacy).scalars()]
    return found
