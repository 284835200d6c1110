"""The metadata store: principals, keys and key versions, read and written as domain records.

Every public method runs in its own short transaction and returns domain
objects (never ORM rows). Any method may raise
:class:`~keymanager.errors.DatabaseUnavailable` when the database cannot be
reached; its message never names the URL or the password.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, Unpack

from sqlalchemy import ColumnElement, Connection, Engine, delete, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from keymanager import errors
from keymanager.db import key_rows, principal_credentials, records
from keymanager.db.changes import record_change, rowcount, sessions
from keymanager.db.engine import connection_errors_as_unavailable, read_retrying
from keymanager.db.models import KeyAliasRow, KeyRow, KeyVersionRow, MetadataVersionRow, PrincipalRow
from keymanager.db.records import select_keys
from keymanager.domain.audit import AuditEntry, ChainKey
from keymanager.domain.credential_kinds import CERTIFICATE_SUBJECT, XKS_URI_PREFIX, CredentialKind
from keymanager.domain.kms import KeyAlias
from keymanager.domain.models import Key, KeyState, KeyVersion, Lifecycle, Principal
from keymanager.domain.policy import Policy


class KeyChanges(TypedDict, total=False):
    """What :meth:`Store.update_key` may change (None: kept as it is)."""

    description: str | None
    policy: Policy | None
    state: KeyState | None
    min_decryption_version: int | None
    lifecycle: Lifecycle | None
    attributes: Mapping[str, Any] | None


class Store:
    """Persistence of principals and keys over one engine; safe to share between threads."""

    def __init__(self, engine: Engine, *, audit_key: ChainKey | None = None) -> None:
        """``audit_key`` seals the audit records written with changes (see ``keymanager.db.audit``)."""
        self._engine = engine
        self._sessions = sessions(engine, audit_key)

    def close(self) -> None:
        """Close the pooled database connections; a later call opens new ones."""
        self._engine.dispose()

    def metadata_version(self) -> int:
        """The current metadata version (see :func:`_changed`)."""
        return read_retrying(self._engine, lambda connection: int(connection.execute(_METADATA_VERSION).scalar_one()))

    def ping(self) -> None:
        """Return when the database answers; raise ``DatabaseUnavailable`` otherwise."""
        with self._reading() as connection:
            connection.execute(text("SELECT 1"))

    # -- principals ---------------------------------------------------------

    def create_principal(self, principal: Principal, token_hash: str, *, record: AuditEntry | None = None) -> None:
        """Store ``principal`` with the hash of its bearer token (and ``record`` in the same transaction).

        Raises ``Conflict`` when the name (or the certificate subject, or the key store's prefix) is taken.
        """
        try:
            with self._transaction() as session:
                session.add(records.principal_row(principal, token_hash))
                session.flush()
                record_change(session, record)
        except IntegrityError:
            raise self._principal_conflict(principal) from None

    def principal_by_token_hash(self, token_hash: str) -> Principal | None:
        """The principal whose bearer token hashes to ``token_hash``, if any."""
        return self._one_principal(PrincipalRow.token_hash == token_hash)

    def principal_by_cert_subject(self, subject: str) -> Principal | None:
        """The principal bound to the TLS client certificate subject ``subject``, if any."""
        return self._holder(CERTIFICATE_SUBJECT, subject)

    def principal_by_name(self, name: str) -> Principal | None:
        """The principal named ``name``, if any."""
        return self._one_principal(PrincipalRow.name == name)

    def principals_by_name(self, names: Collection[str]) -> list[Principal]:
        """The principals whose names are among ``names`` (those that exist)."""
        with self._transaction() as session:
            rows = session.scalars(select(PrincipalRow).where(PrincipalRow.name.in_(sorted(names))))
            return [records.principal(row) for row in rows]

    def principal_names(self, ids: Collection[str]) -> dict[str, str]:
        """Id to name of the principals whose ids are among ``ids`` (those that exist)."""
        with self._transaction() as session:
            rows = session.execute(select(PrincipalRow.id, PrincipalRow.name).where(PrincipalRow.id.in_(sorted(ids))))
            return {row.id: row.name for row in rows}

    def list_principals(self) -> list[Principal]:
        """Every principal, ordered by name."""
        with self._transaction() as session:
            rows = session.scalars(select(PrincipalRow).order_by(PrincipalRow.name))
            return [records.principal(row) for row in rows]

    def delete_principal(self, name: str, *, record: AuditEntry | None = None) -> bool:
        """Delete the principal named ``name`` and its grants in every policy (with ``record``); True if found."""
        with self._transaction() as session:
            principal_id = session.scalar(select(PrincipalRow.id).where(PrincipalRow.name == name))
            if principal_id is None:
                return False
            session.execute(delete(PrincipalRow).where(PrincipalRow.id == principal_id))
            key_rows.forget_in_policies(session, principal_id)
            record_change(session, record)
            return True

    # -- keys ---------------------------------------------------------------

    def create_key(self, key: Key, *, record: AuditEntry | None = None) -> None:
        """Store ``key`` and all its versions (and ``record``) atomically; ``Conflict`` when the name is
        taken (by another key's name or alias: the row of its name in ``key_aliases`` says so)."""
        try:
            with self._transaction() as session:
                session.add(records.key_row(key))
                session.flush()
                moment = key.created_at
                session.add(KeyAliasRow(name=key.name, key_id=key.id, created_at=moment, updated_at=moment))
                session.flush()
                record_change(session, record)
        except IntegrityError:
            raise errors.Conflict(f"a key named {key.name!r} exists") from None

    def get_key(self, id_or_name: str) -> Key | None:
        """The key whose id (tried first) or name is ``id_or_name``, with its versions; two queries."""
        return read_retrying(self._engine, lambda connection: records.key_by_ref(connection, id_or_name))

    def list_keys(self) -> list[Key]:
        """Every key with its versions, ordered by name."""
        with self._reading() as connection:
            return records.all_keys(connection)

    def update_key(
        self,
        key_id: str,
        *,
        record: AuditEntry | None = None,
        expected_updated_at: datetime | None = None,
        **changes: Unpack[KeyChanges],
    ) -> Key:
        """Change the attributes of key ``key_id`` given in ``changes`` (None or absent: kept) and bump
        ``updated_at``.

        With ``expected_updated_at``, only if the key's ``updated_at`` is still that (compare-and-set;
        the new ``updated_at`` is then strictly later), else ``PreconditionFailed``.
        Returns the updated key; raises ``KeyNotFound`` for an unknown id.
        """
        values: dict[str, Any] = {"updated_at": _now()}
        condition = KeyRow.id == key_id
        if expected_updated_at is not None:
            values["updated_at"] = max(values["updated_at"], expected_updated_at + timedelta(microseconds=1))
            condition = condition & (KeyRow.updated_at == expected_updated_at)
        for column, value in changes.items():
            if value is not None:
                values[column] = key_rows.column_value(value)
        with self._transaction() as session:
            if not key_rows.update_keys(session, condition, values):
                if expected_updated_at is not None and session.scalar(select(KeyRow.id).where(KeyRow.id == key_id)):
                    raise errors.PreconditionFailed()
                raise errors.KeyNotFound()
            record_change(session, record)
            return key_rows.load_key(session, key_id)

    def rename_keys(self, renames: Sequence[tuple[str, str]], *, record: AuditEntry | None) -> None:
        """Give each key id its new name, in order, in one transaction (the KMS API's first alias of
        a key is its name); KeyNotFound for an unknown id, Conflict for a taken name or alias."""
        self.change_aliases(renames=renames, record=record)

    def aliases(self, key_ids: Collection[str] | None = None) -> list[KeyAlias]:
        """Every name of the keys ``key_ids`` (None: of every key), their own names included, by name."""
        statement = select(KeyAliasRow).order_by(KeyAliasRow.name)
        if key_ids is not None:
            statement = statement.where(KeyAliasRow.key_id.in_(sorted(key_ids)))
        with self._transaction() as session:
            return [KeyAlias(r.name, r.key_id, r.created_at, r.updated_at) for r in session.scalars(statement)]

    def change_aliases(
        self,
        *,
        removed: Sequence[str] = (),
        renames: Sequence[tuple[str, str]] = (),
        added: Sequence[tuple[str, str]] = (),
        limit: int | None = None,
        record: AuditEntry | None,
    ) -> bool:
        """In one transaction: drop the aliases ``removed`` (never a key's own name), give keys new
        names (``renames``: key id, name), then give keys further aliases (``added``: name, key id).

        False, and nothing changed, when a key of ``added`` would then hold more than ``limit``
        aliases besides its name. KeyNotFound for an unknown key id; NotFound for an alias of
        ``removed`` that is not one (or is a key's own name); Conflict for a name already taken.
        """
        now = _now()
        try:
            with self._transaction() as session:
                if limit is not None and not key_rows.room_for(session, [key_id for _, key_id in added], limit):
                    return False
                own_names = select(KeyRow.name)
                for name in removed:
                    dropped = delete(KeyAliasRow).where(KeyAliasRow.name == name, KeyAliasRow.name.not_in(own_names))
                    if rowcount(session, dropped) == 0:
                        raise errors.NotFound("alias not found")
                for key_id, name in renames:
                    key_rows.rename(session, key_id, name, now)
                for name, key_id in added:
                    session.add(KeyAliasRow(name=name, key_id=key_id, created_at=now, updated_at=now))
                session.flush()
                record_change(session, record)
        except IntegrityError:
            raise errors.Conflict("a key with this name (alias) exists") from None
        return True

    def set_rotation_period(self, key_id: str, days: int | None, *, record: AuditEntry | None) -> None:
        """Rotate key ``key_id`` every ``days`` days (None: only by hand); KeyNotFound for an unknown id."""
        with self._transaction() as session:
            if not key_rows.update_keys(
                session, KeyRow.id == key_id, {"rotation_period_days": days, "updated_at": _now()}
            ):
                raise errors.KeyNotFound()
            record_change(session, record)

    def add_key_version(
        self,
        key_id: str,
        version: KeyVersion,
        *,
        expected_primary: int,
        record: AuditEntry | None = None,
        activate: bool = False,
    ) -> Key:
        """Add ``version`` to key ``key_id`` and make it primary, if the primary is still ``expected_primary``.

        ``activate``: the key must be ``pending_import`` and becomes ``enabled`` (its first import).

        Returns the updated key. Raises ``KeyNotFound`` for an unknown id and
        ``Conflict`` when the key was rotated meanwhile (compare-and-set: of
        two concurrent rotations from the same primary, one wins).
        """
        current = (KeyRow.id == key_id) & (KeyRow.primary_version == expected_primary)
        values: dict[str, object] = {"primary_version": version.version, "updated_at": _now()}
        if activate:
            current &= KeyRow.state == KeyState.PENDING_IMPORT.value
            values["state"] = KeyState.ENABLED.value
        try:
            with self._transaction() as session:
                if not key_rows.update_keys(session, current, values):
                    raise key_rows.refusal(
                        session,
                        key_id,
                        f"the key was rotated meanwhile: its primary version is no longer {expected_primary}",
                    )
                session.add(records.version_row(key_id, version))
                session.flush()
                record_change(session, record)
                return key_rows.load_key(session, key_id)
        except IntegrityError:
            raise errors.Conflict(f"key version {version.version} already exists") from None

    def schedule_deletion(self, key_id: str, deletion_date: datetime, *, record: AuditEntry | None = None) -> Key:
        """Move an enabled, disabled or pending-import key to ``pending_deletion`` until ``deletion_date``.

        Raises ``KeyNotFound``, or ``Conflict`` when the key is already pending deletion or destroyed.
        """
        states = [KeyState.ENABLED.value, KeyState.DISABLED.value, KeyState.PENDING_IMPORT.value]
        movable = (KeyRow.id == key_id) & KeyRow.state.in_(states)
        values = {"state": KeyState.PENDING_DELETION.value, "deletion_date": deletion_date, "updated_at": _now()}
        refused = "only an enabled or disabled key can be scheduled for deletion"
        return self._move(key_id, movable, values, refused, record)

    def cancel_deletion(self, key_id: str, *, now: datetime, record: AuditEntry | None = None) -> Key:
        """Return a key pending deletion (whose date has not come) to ``disabled``.

        Raises ``KeyNotFound``, or ``Conflict`` when the key is not pending deletion or its date has passed.
        """
        cancellable = (
            (KeyRow.id == key_id) & (KeyRow.state == KeyState.PENDING_DELETION.value) & (KeyRow.deletion_date > now)
        )
        values = {"state": KeyState.DISABLED.value, "deletion_date": None, "updated_at": _now()}
        refused = "the key is not pending deletion, or its deletion date has passed"
        return self._move(key_id, cancellable, values, refused, record)

    def keys_to_destroy(self, now: datetime) -> list[Key]:
        """Keys pending deletion whose deletion date has come."""
        due = (KeyRow.state == KeyState.PENDING_DELETION.value) & (KeyRow.deletion_date <= now)
        with self._transaction() as session:
            return select_keys(session.connection(), due, KeyRow.deletion_date)

    def mark_destroyed(self, key_id: str, *, record: AuditEntry | None = None) -> bool:
        """Mark a key pending deletion (and its versions) destroyed; True for the one caller that did it."""
        pending = (KeyRow.id == key_id) & (KeyRow.state == KeyState.PENDING_DELETION.value)
        now = _now()
        with self._transaction() as session:
            if not key_rows.update_keys(session, pending, {"state": KeyState.DESTROYED.value, "updated_at": now}):
                return False
            session.execute(
                update(KeyVersionRow).where(KeyVersionRow.key_id == key_id).values(destroyed_at=now),
                execution_options={"synchronize_session": False},
            )
            record_change(session, record)
            return True

    def keys_with_rotation_period(self) -> list[Key]:
        """Enabled keys that rotate on a schedule."""
        scheduled = (KeyRow.state == KeyState.ENABLED.value) & KeyRow.rotation_period_days.is_not(None)
        with self._transaction() as session:
            return select_keys(session.connection(), scheduled)

    # -- internals ----------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A connection for reads with SQLAlchemy Core (no ORM session), released when the block ends."""
        with connection_errors_as_unavailable(), self._engine.connect() as connection:
            yield connection

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        """A session in one transaction, committed when the block ends without an exception."""
        with connection_errors_as_unavailable(), self._sessions.begin() as session:
            yield session

    def _move(
        self,
        key_id: str,
        condition: ColumnElement[bool],
        values: dict[str, Any],
        refused: str,
        record: AuditEntry | None,
    ) -> Key:
        """Set ``values`` on key ``key_id`` if it matches ``condition`` (with ``record``); the key after.
        KeyNotFound, or Conflict saying ``refused`` when the key does not match."""
        with self._transaction() as session:
            if not key_rows.update_keys(session, condition, values):
                raise key_rows.refusal(session, key_id, refused)
            record_change(session, record)
            return key_rows.load_key(session, key_id)

    def _one_principal(self, condition: ColumnElement[bool]) -> Principal | None:
        with self._transaction() as session:
            row = session.scalars(select(PrincipalRow).where(condition)).one_or_none()
            return None if row is None else records.principal(row)

    def _holder(self, kind: CredentialKind, name: str) -> Principal | None:
        with self._transaction() as session:
            row = principal_credentials.holder(session, kind, name)
            return None if row is None else records.principal(row)

    def _principal_conflict(self, principal: Principal) -> errors.Conflict:
        if principal.xks_uri_prefix and self.principal_by_name(principal.name) is None:
            taken = self._holder(XKS_URI_PREFIX, principal.xks_uri_prefix)
            if taken is not None:
                return errors.Conflict(f"a key store with xks_uri_prefix {principal.xks_uri_prefix!r} exists")
        if principal.cert_subject and self.principal_by_name(principal.name) is None:
            return errors.Conflict(f"a principal with certificate subject {principal.cert_subject!r} exists")
        return errors.Conflict(f"a principal named {principal.name!r} exists")


_METADATA_VERSION = select(MetadataVersionRow.__table__.c.version).where(MetadataVersionRow.__table__.c.id == 1)


def _now() -> datetime:
    return datetime.now(UTC)
