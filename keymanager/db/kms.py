"""What the AWS KMS API stores beyond :class:`~keymanager.db.store.Store`: access keys, and the
key changes only that API makes (a key's name, which is its alias, and its rotation period).

Every change bumps the metadata version in its own transaction, with its audit entry, exactly
as ``Store`` does: a revoked access key stops working at once on every replica.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from keymanager import errors
from keymanager.db import records
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AccessKeyRow, KeyRow, PrincipalRow
from keymanager.db.store import _AUDIT_KEY, _changed, _rowcount
from keymanager.domain.access_keys import MAX_PER_PRINCIPAL, AccessKey
from keymanager.domain.audit import AuditEntry, ChainKey


class KmsStore:
    """Access keys and the KMS API's key changes, over one engine; safe to share between threads."""

    def __init__(self, engine: Engine, *, audit_key: ChainKey | None = None) -> None:
        """``audit_key`` seals the audit records written with changes (see ``keymanager.db.audit``)."""
        self._sessions = sessionmaker(engine, expire_on_commit=False, info={_AUDIT_KEY: audit_key})

    # -- access keys --------------------------------------------------------------------
    def add_access_key(
        self, principal_name: str, access_key_id: str, sealed: bytes, wrap_label: str, *, audit: AuditEntry | None
    ) -> datetime:
        """Store an access key of principal ``principal_name``; its creation time.

        Raises NotFound for an unknown principal, Conflict for a taken id or a principal that
        holds ``MAX_PER_PRINCIPAL`` keys already.
        """
        now = datetime.now(UTC)
        try:
            with self._transaction() as session:
                principal = session.scalars(select(PrincipalRow).where(PrincipalRow.name == principal_name)).first()
                if principal is None:
                    raise errors.NotFound("principal not found")
                held = session.scalars(select(AccessKeyRow.id).where(AccessKeyRow.principal_id == principal.id))
                if len(list(held)) >= MAX_PER_PRINCIPAL:
                    raise errors.Conflict(f"a principal holds at most {MAX_PER_PRINCIPAL} access keys")
                session.add(
                    AccessKeyRow(
                        id=access_key_id,
                        principal_id=principal.id,
                        sealed_secret=sealed,
                        wrap_label=wrap_label,
                        created_at=now,
                    )
                )
                session.flush()
                _changed(session, audit)
        except IntegrityError:
            raise errors.Conflict("this access key id is taken") from None
        return now

    def access_keys_of(self, principal_name: str) -> list[tuple[str, datetime]] | None:
        """Ids and creation times of the principal's access keys (oldest first); None for no such principal."""
        with self._transaction() as session:
            principal = session.scalars(select(PrincipalRow.id).where(PrincipalRow.name == principal_name)).first()
            if principal is None:
                return None
            rows = session.execute(
                select(AccessKeyRow.id, AccessKeyRow.created_at)
                .where(AccessKeyRow.principal_id == principal)
                .order_by(AccessKeyRow.created_at, AccessKeyRow.id)
            )
            return [(row.id, _utc(row.created_at)) for row in rows]

    def delete_access_key(self, principal_name: str, access_key_id: str, *, audit: AuditEntry | None) -> bool:
        """Revoke the principal's access key ``access_key_id``; True when there was one."""
        with self._transaction() as session:
            owner = select(PrincipalRow.id).where(PrincipalRow.name == principal_name).scalar_subquery()
            statement = delete(AccessKeyRow).where(AccessKeyRow.id == access_key_id, AccessKeyRow.principal_id == owner)
            if _rowcount(session, statement) == 0:
                return False
            _changed(session, audit)
            return True

    def access_key(self, access_key_id: str) -> AccessKey | None:
        """The access key ``access_key_id`` with its principal, if both exist."""
        with self._transaction() as session:
            found = session.execute(
                select(AccessKeyRow, PrincipalRow)
                .join(PrincipalRow, PrincipalRow.id == AccessKeyRow.principal_id)
                .where(AccessKeyRow.id == access_key_id)
            ).first()
            if found is None:
                return None
            row, principal = found
            return AccessKey(
                id=row.id,
                principal=records.principal(principal),
                sealed_secret=bytes(row.sealed_secret),
                wrap_label=row.wrap_label,
                created_at=_utc(row.created_at),
            )

    # -- key changes of the KMS API ---------------------------------------------------------
    def rename_keys(self, renames: Sequence[tuple[str, str]], *, audit: AuditEntry | None) -> None:
        """Give each key id its new name, in order, in one transaction (Conflict for a taken name)."""
        try:
            with self._transaction() as session:
                for key_id, name in renames:
                    statement = update(KeyRow).where(KeyRow.id == key_id).values(name=name, updated_at=_now())
                    if _rowcount(session, statement) == 0:
                        raise errors.KeyNotFound()
                session.flush()
                _changed(session, audit)
        except IntegrityError:
            raise errors.Conflict("a key with this name (alias) exists") from None

    def set_rotation_period(self, key_id: str, days: int | None, *, audit: AuditEntry | None) -> None:
        """Rotate key ``key_id`` every ``days`` days (None: only by hand)."""
        with self._transaction() as session:
            statement = update(KeyRow).where(KeyRow.id == key_id).values(rotation_period_days=days, updated_at=_now())
            if _rowcount(session, statement) == 0:
                raise errors.KeyNotFound()
            _changed(session, audit)

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            yield session


def _now() -> datetime:
    return datetime.now(UTC)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
