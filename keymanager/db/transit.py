"""What the Vault Transit door stores beyond :class:`~keymanager.db.store.Store`: a key's Transit
settings, and the AppRole credential kind (credentials and the client tokens their logins made).

Secrets are stored only as SHA-256 hashes (``domain/credentials.py``): an AppRole ``secret_id`` and a
client token are high-entropy, as bearer tokens are. Every change bumps the metadata version in its own
transaction with its audit record (``db/changes.py``): a deleted credential, an evicted or expired token
stops authenticating at once on every replica, as a deleted bearer token does; an AppRole login is
such a change (its token is a new credential).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from keymanager import errors
from keymanager.db import records
from keymanager.db.changes import record_change, rowcount, sessions
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AppRoleCredentialRow, AppRoleTokenRow, KeyRow, PrincipalRow, TransitKeyRow
from keymanager.domain.audit import AuditEntry, ChainKey
from keymanager.domain.models import Principal

MAX_APPROLES = 2
"""AppRole credentials a principal may hold at once (two: one to replace the other)."""


@dataclass(frozen=True)
class TransitSettings:
    """A key's Transit settings (a key without a row has the defaults)."""

    deletion_allowed: bool = False
    min_encryption_version: int = 0


@dataclass(frozen=True)
class ClientToken:
    """What is known of a client token an AppRole login made."""

    principal: Principal
    role_id: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class Login:
    """What an AppRole login asks to store: the credential presented (its ``role_id``, the hash of its
    ``secret_id``) and the new token (its hash), valid until ``expires_at``; at most ``max_tokens``
    tokens per principal are kept (the oldest go first)."""

    role_id: str
    secret_hash: str
    token_hash: str
    now: datetime
    expires_at: datetime
    max_tokens: int


class TransitStore:
    """Transit settings, AppRole credentials and client tokens, over one engine; safe to share between threads."""

    def __init__(self, engine: Engine, *, audit_key: ChainKey | None = None) -> None:
        """``audit_key`` seals the audit records written with changes (see ``keymanager.db.audit``)."""
        self._sessions = sessions(engine, audit_key)

    # -- a key's Transit settings ----------------------------------------------------------
    def settings(self, key_id: str) -> TransitSettings:
        """The Transit settings of key ``key_id`` (the defaults when none were set)."""
        with self._transaction() as session:
            row = session.get(TransitKeyRow, key_id)
            if row is None:
                return TransitSettings()
            return TransitSettings(row.deletion_allowed, row.min_encryption_version)

    def set_settings(self, key_id: str, settings: TransitSettings, *, record: AuditEntry | None) -> None:
        """Store ``settings`` for key ``key_id`` (with ``record``); KeyNotFound when there is no such key."""
        with self._transaction() as session:
            if session.get(KeyRow, key_id) is None:
                raise errors.KeyNotFound()
            row = session.get(TransitKeyRow, key_id)
            if row is None:
                session.add(TransitKeyRow(key_id=key_id))
                session.flush()
                row = session.get(TransitKeyRow, key_id)
                assert row is not None
            row.deletion_allowed = settings.deletion_allowed
            row.min_encryption_version = settings.min_encryption_version
            record_change(session, record)

    # -- AppRole credentials ---------------------------------------------------------------
    def add_approle(
        self, principal_name: str, role_id: str, secret_hash: str, *, record: AuditEntry | None
    ) -> tuple[Principal, datetime]:
        """Store an AppRole credential of principal ``principal_name``: the principal and the creation time.
        NotFound for an unknown principal, Conflict when it holds :data:`MAX_APPROLES` already."""
        now = datetime.now(UTC)
        try:
            with self._transaction() as session:
                row = session.scalars(select(PrincipalRow).where(PrincipalRow.name == principal_name)).first()
                if row is None:
                    raise errors.NotFound("principal not found")
                held = session.scalar(
                    select(func.count())
                    .select_from(AppRoleCredentialRow)
                    .where(AppRoleCredentialRow.principal_id == row.id)
                )
                if (held or 0) >= MAX_APPROLES:
                    raise errors.Conflict(f"a principal holds at most {MAX_APPROLES} AppRole credentials")
                session.add(
                    AppRoleCredentialRow(role_id=role_id, principal_id=row.id, secret_hash=secret_hash, created_at=now)
                )
                session.flush()
                record_change(session, record)
                return records.principal(row), now
        except IntegrityError:
            raise errors.Conflict("this role_id is taken") from None

    def approles_of(self, principal_name: str) -> list[tuple[str, datetime]] | None:
        """The role ids and creation times of the principal's AppRole credentials (oldest first); None
        for no such principal."""
        with self._transaction() as session:
            principal = session.scalar(select(PrincipalRow.id).where(PrincipalRow.name == principal_name))
            if principal is None:
                return None
            rows = session.execute(
                select(AppRoleCredentialRow.role_id, AppRoleCredentialRow.created_at)
                .where(AppRoleCredentialRow.principal_id == principal)
                .order_by(AppRoleCredentialRow.created_at, AppRoleCredentialRow.role_id)
            )
            return [(row.role_id, row.created_at) for row in rows]

    def delete_approle(self, principal_name: str, role_id: str, *, record: AuditEntry | None) -> bool:
        """Delete the principal's AppRole credential ``role_id`` and every client token its logins made
        (with ``record``); True when there was one."""
        with self._transaction() as session:
            owner = select(PrincipalRow.id).where(PrincipalRow.name == principal_name).scalar_subquery()
            mine = (AppRoleCredentialRow.role_id == role_id) & (AppRoleCredentialRow.principal_id == owner)
            if session.scalar(select(AppRoleCredentialRow.role_id).where(mine)) is None:
                return False
            rowcount(session, delete(AppRoleTokenRow).where(AppRoleTokenRow.role_id == role_id))
            rowcount(session, delete(AppRoleCredentialRow).where(mine))
            record_change(session, record)
            return True

    # -- logins and their client tokens ----------------------------------------------------
    def login(self, login: Login, *, record: AuditEntry | None) -> Principal | None:
        """Store a new client token for the principal whose credential ``login`` presents, evicting its
        expired tokens and, past ``max_tokens``, its oldest (with ``record`` naming the principal); the
        principal, or None (nothing written) when no credential matches."""
        with self._transaction() as session:
            found = session.execute(
                select(PrincipalRow)
                .join(AppRoleCredentialRow, AppRoleCredentialRow.principal_id == PrincipalRow.id)
                .where(
                    AppRoleCredentialRow.role_id == login.role_id, AppRoleCredentialRow.secret_hash == login.secret_hash
                )
            ).scalar_one_or_none()
            if found is None:
                return None
            principal = records.principal(found)
            mine = AppRoleTokenRow.principal_id == principal.id
            rowcount(session, delete(AppRoleTokenRow).where(mine, AppRoleTokenRow.expires_at <= login.now))
            kept = list(
                session.scalars(
                    select(AppRoleTokenRow.token_hash)
                    .where(mine)
                    .order_by(AppRoleTokenRow.created_at.desc(), AppRoleTokenRow.token_hash)
                    .limit(login.max_tokens - 1)
                )
            )
            rowcount(session, delete(AppRoleTokenRow).where(mine, AppRoleTokenRow.token_hash.notin_(kept)))
            session.add(
                AppRoleTokenRow(
                    token_hash=login.token_hash,
                    principal_id=principal.id,
                    role_id=login.role_id,
                    created_at=login.now,
                    expires_at=login.expires_at,
                )
            )
            session.flush()
            record_change(session, None if record is None else _naming(record, principal))
            return principal

    def client_token(self, token_hash: str, now: datetime | None = None) -> ClientToken | None:
        """The live client token whose hash is ``token_hash`` (None: none, or expired)."""
        moment = now or datetime.now(UTC)
        with self._transaction() as session:
            row = session.execute(
                select(PrincipalRow, AppRoleTokenRow)
                .join(AppRoleTokenRow, AppRoleTokenRow.principal_id == PrincipalRow.id)
                .where(AppRoleTokenRow.token_hash == token_hash, AppRoleTokenRow.expires_at > moment)
            ).one_or_none()
            if row is None:
                return None
            principal, token = row
            return ClientToken(records.principal(principal), token.role_id, token.created_at, token.expires_at)

    def principal_by_client_token(self, token_hash: str) -> Principal | None:
        """The principal a live client token whose hash is ``token_hash`` authenticates, if any."""
        found = self.client_token(token_hash)
        return None if found is None else found.principal

    def sweep_expired(self, now: datetime | None = None) -> int:
        """Delete the client tokens that expired (a change: cached ones stop too); how many."""
        moment = now or datetime.now(UTC)
        with self._transaction() as session:
            removed = rowcount(session, delete(AppRoleTokenRow).where(AppRoleTokenRow.expires_at <= moment))
            if removed:
                record_change(session, None)
            return removed

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            yield session


def _naming(entry: AuditEntry, principal: Principal) -> AuditEntry:
    return replace(entry, principal=principal.name)
