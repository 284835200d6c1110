"""What the AWS KMS API stores beyond :class:`~keymanager.db.store.Store`: access keys and key tags
(the keys themselves, aliases and rotation periods included, are ``Store``'s: one repository
writes each table).

Every change bumps the metadata version in its own transaction, with its audit entry, exactly
as ``Store`` does (``db/changes.py``): a revoked access key stops working at once on every replica.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from keymanager import errors
from keymanager.db import records
from keymanager.db.changes import record_change, rowcount, sessions
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AccessKeyRow, KeyRow, KeyTagRow, PrincipalRow
from keymanager.domain.access_keys import MAX_PER_PRINCIPAL, AccessKey
from keymanager.domain.audit import AuditEntry, ChainKey


class KmsStore:
    """Access keys and key tags, over one engine; safe to share between threads."""

    def __init__(self, engine: Engine, *, audit_key: ChainKey | None = None) -> None:
        """``audit_key`` seals the audit records written with changes (see ``keymanager.db.audit``)."""
        self._sessions = sessions(engine, audit_key)

    # -- access keys --------------------------------------------------------------------
    def add_access_key(
        self, principal_name: str, access_key_id: str, sealed: bytes, wrap_label: str, *, record: AuditEntry | None
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
                record_change(session, record)
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

    def delete_access_key(self, principal_name: str, access_key_id: str, *, record: AuditEntry | None) -> bool:
        """Revoke the principal's access key ``access_key_id``; True when there was one."""
        with self._transaction() as session:
            owner = select(PrincipalRow.id).where(PrincipalRow.name == principal_name).scalar_subquery()
            statement = delete(AccessKeyRow).where(AccessKeyRow.id == access_key_id, AccessKeyRow.principal_id == owner)
            if rowcount(session, statement) == 0:
                return False
            record_change(session, record)
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

    # -- tags -------------------------------------------------------------------------------
    def tags_of(self, key_id: str) -> dict[str, str]:
        """The tags of key ``key_id``, ordered by tag key."""
        with self._transaction() as session:
            rows = session.execute(
                select(KeyTagRow.tag_key, KeyTagRow.tag_value)
                .where(KeyTagRow.key_id == key_id)
                .order_by(KeyTagRow.tag_key)
            )
            return {row.tag_key: row.tag_value for row in rows}

    def tag_key(self, key_id: str, tags: Mapping[str, str], *, limit: int, record: AuditEntry | None) -> bool:
        """Add ``tags`` to key ``key_id`` (a given tag key's value replaced); False, and nothing
        changed, when the key would then hold more than ``limit`` tags. KeyNotFound for no such key."""
        with self._transaction() as session:
            # the key row locked: concurrent taggings of one key count its tags one after the other
            if session.execute(select(KeyRow.id).where(KeyRow.id == key_id).with_for_update()).first() is None:
                raise errors.KeyNotFound()
            held = {row.tag_key: row for row in session.scalars(select(KeyTagRow).where(KeyTagRow.key_id == key_id))}
            if len(held.keys() | tags.keys()) > limit:
                return False
            for tag_key, value in tags.items():
                if tag_key in held:
                    held[tag_key].tag_value = value
                else:
                    session.add(KeyTagRow(key_id=key_id, tag_key=tag_key, tag_value=value))
            session.flush()
            record_change(session, record)
            return True

    def untag_key(self, key_id: str, tag_keys: Collection[str], *, record: AuditEntry | None) -> None:
        """Remove the tags ``tag_keys`` of key ``key_id`` (tag keys it does not hold are ignored)."""
        with self._transaction() as session:
            statement = delete(KeyTagRow).where(KeyTagRow.key_id == key_id, KeyTagRow.tag_key.in_(sorted(tag_keys)))
            session.execute(statement)
            record_change(session, record)

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            yield session


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
