"""Rows to domain records and back, for the metadata store.

Keys are read with SQLAlchemy Core, never as ORM objects: one statement joins a key's
row to its versions' rows (:func:`select_keys`), and the rows become :class:`Key` records
directly. Writes still go through the ORM rows of :mod:`keymanager.db.models`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, String, bindparam, case, or_, select

from keymanager.db import principal_credentials
from keymanager.db.models import KeyAliasRow, KeyRow, KeyVersionRow, PrincipalRow
from keymanager.domain.credential_kinds import principal_fields
from keymanager.domain.models import (
    Algorithm,
    HsmObjects,
    Key,
    KeyState,
    KeyUsage,
    KeyVersion,
    Lifecycle,
    Origin,
    Principal,
    Role,
)
from keymanager.domain.policy import Policy
from keymanager.domain.tokens import TokenFormat

_KEYS = KeyRow.__table__
_ALIASES = KeyAliasRow.__table__
_VERSIONS = KeyVersionRow.__table__
_JOINED = select(
    _KEYS,
    _VERSIONS.c.version,
    _VERSIONS.c.enc_label,
    _VERSIONS.c.mac_label,
    _VERSIONS.c.private_label,
    _VERSIONS.c.public_label,
    _VERSIONS.c.public_key,
    _VERSIONS.c.created_at.label("version_created_at"),
).outerjoin(_VERSIONS, _VERSIONS.c.key_id == _KEYS.c.id)
"""Every key's row joined to its versions' rows (a key without versions: one row of NULLs)."""
_REF = bindparam("ref", type_=String())
_CHOSEN = (
    select(_KEYS.c.id)
    .where(
        or_(
            _KEYS.c.id == _REF,
            _KEYS.c.name == _REF,
            _KEYS.c.id == select(_ALIASES.c.key_id).where(_ALIASES.c.name == _REF).scalar_subquery(),
        )
    )
    .order_by(case((_KEYS.c.id == _REF, 0), else_=1))
    .limit(1)
    .scalar_subquery()
)
_BY_REF = _JOINED.where(_KEYS.c.id == _CHOSEN).order_by(_VERSIONS.c.version)
_BY_NAME = _JOINED.order_by(_KEYS.c.name, _VERSIONS.c.version)
# Built once: SQLAlchemy then finds their compiled form in its cache without building them again.


def key_by_ref(connection: Connection, ref: str) -> Key | None:
    """The key whose id (tried first), name or alias is ``ref``, with its versions: one statement."""
    found = _keys(connection.execute(_BY_REF, {"ref": ref}).all())
    return found[0] if found else None


def all_keys(connection: Connection) -> list[Key]:
    """Every key with its versions, ordered by name: one statement."""
    return _keys(connection.execute(_BY_NAME).all())


def select_keys(connection: Connection, condition: ColumnElement[bool], *order: Any) -> list[Key]:
    """The keys matching ``condition`` (ordered by ``order``), each with its versions: one statement."""
    statement = _JOINED.where(condition).order_by(*order, _KEYS.c.id, _VERSIONS.c.version)
    return _keys(connection.execute(statement).all())


def _keys(rows: Sequence[Row[Any]]) -> list[Key]:
    """Joined key and version rows (a key's rows together, versions ascending) as keys."""
    found: dict[str, tuple[Row[Any], dict[int, KeyVersion]]] = {}
    for row in rows:
        _, versions = found.setdefault(row.id, (row, {}))
        if row.version is not None:
            versions[row.version] = KeyVersion(
                key_id=row.id,
                version=row.version,
                hsm=HsmObjects(
                    enc_label=row.enc_label,
                    mac_label=row.mac_label,
                    private_label=row.private_label,
                    public_label=row.public_label,
                ),
                created_at=row.version_created_at,
                public_key=None if row.public_key is None else bytes(row.public_key),
            )
    return [_key(row, versions) for row, versions in found.values()]


def _key(row: Row[Any], versions: dict[int, KeyVersion]) -> Key:
    return Key(
        id=row.id,
        name=row.name,
        algorithm=Algorithm(row.algorithm),
        state=KeyState(row.state),
        policy=Policy.from_dict(row.policy),
        primary_version=row.primary_version,
        min_decryption_version=row.min_decryption_version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        description=row.description,
        rotation_period_days=row.rotation_period_days,
        deletion_date=row.deletion_date,
        versions=versions,
        token_format=None if row.token_format is None else TokenFormat.parse(row.token_format),
        origin=Origin(row.origin),
        lifecycle=None if row.kmip_lifecycle is None else Lifecycle(row.kmip_lifecycle),  # the column's name
        exportable=bool(row.exportable),
        attributes=row.kmip_attributes or {},  # the column's name (KeyRow.attributes)
        usage=None if row.usage is None else KeyUsage(row.usage),
    )


def key_row(key: Key) -> KeyRow:
    """The rows of a new ``key`` and its versions."""
    return KeyRow(
        id=key.id,
        name=key.name,
        algorithm=key.algorithm.value,
        state=key.state.value,
        description=key.description,
        policy=key.policy.to_dict(),
        primary_version=key.primary_version,
        min_decryption_version=key.min_decryption_version,
        rotation_period_days=key.rotation_period_days,
        deletion_date=key.deletion_date,
        created_at=key.created_at,
        updated_at=key.updated_at,
        token_format=None if key.token_format is None else key.token_format.to_json(),
        origin=key.origin.value,
        lifecycle=None if key.lifecycle is None else key.lifecycle.value,
        exportable=key.exportable,
        attributes=dict(key.attributes) or None,
        usage=None if key.usage is None else key.usage.value,
        versions=[version_row(key.id, version) for version in key.versions.values()],
    )


def version_row(key_id: str, version: KeyVersion) -> KeyVersionRow:
    """The row of a new ``version`` of key ``key_id``."""
    return KeyVersionRow(
        key_id=key_id,
        version=version.version,
        enc_label=version.hsm.enc_label,
        mac_label=version.hsm.mac_label,
        private_label=version.hsm.private_label,
        public_label=version.hsm.public_label,
        public_key=version.public_key,
        created_at=version.created_at,
    )


def principal_row(principal: Principal, token_hash: str) -> PrincipalRow:
    """The row of a new ``principal`` holding the token that hashes to ``token_hash``, with its
    credentials' rows (and their legacy columns: ``db/principal_credentials.py``)."""
    return PrincipalRow(
        id=principal.id,
        name=principal.name,
        role=principal.role.value,
        token_hash=token_hash,
        created_at=principal.created_at,
        create_keys=principal.create_keys,
        key_store=principal.key_store,
        credentials=principal_credentials.rows_of(principal, principal.created_at),
        **principal_credentials.legacy_columns(principal),
    )


def principal(row: PrincipalRow) -> Principal:
    """The principal of ``row`` (its credentials loaded with it: ``PrincipalRow.credentials``)."""
    return Principal(
        id=row.id,
        name=row.name,
        role=Role(row.role),
        created_at=row.created_at,
        create_keys=bool(row.create_keys),
        key_store=bool(row.key_store),
        **principal_fields(principal_credentials.held(row)),
    )
