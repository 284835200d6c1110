"""The statements a change of the key rows runs inside its transaction, for :class:`~keymanager.db.store.Store`:
updating keys by condition, reading one back, telling a missing key from a refused change, renaming a
key with the row of its name, the room a key has for aliases, a principal forgotten in every policy.

Each takes the change's session and leaves committing (and the change's audit record) to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from keymanager import errors
from keymanager.db.changes import rowcount
from keymanager.db.models import KeyAliasRow, KeyRow
from keymanager.db.records import select_keys
from keymanager.domain.models import Key, KeyState, Lifecycle
from keymanager.domain.policy import Policy


def forget_in_policies(session: Session, principal_id: str) -> None:
    """Remove ``principal_id`` from every key policy that names it."""
    for key_id, stored in session.execute(select(KeyRow.id, KeyRow.policy)):
        policy = Policy.from_dict(stored)
        if policy.names(principal_id):
            kept = policy.translated({p: p for p in policy.principals() - {principal_id}})
            update_keys(session, KeyRow.id == key_id, {"policy": kept.to_dict()})


def column_value(value: object) -> object:
    """A changed attribute of a key as its column holds it."""
    if isinstance(value, Policy):
        return value.to_dict()
    if isinstance(value, Mapping):
        return dict(value)
    return value.value if isinstance(value, (KeyState, Lifecycle)) else value


def load_key(session: Session, key_id: str) -> Key:
    """Key ``key_id`` as the session sees it now (it exists: the caller just changed it)."""
    return select_keys(session.connection(), KeyRow.id == key_id)[0]


def rename(session: Session, key_id: str, name: str, now: datetime) -> None:
    """Key ``key_id`` named ``name``, the row of its old name moved along; KeyNotFound for no such key."""
    old = session.scalar(select(KeyRow.name).where(KeyRow.id == key_id).with_for_update())
    if old is None:
        raise errors.KeyNotFound()
    update_keys(session, KeyRow.id == key_id, {"name": name, "updated_at": now})
    moved = update(KeyAliasRow).where(KeyAliasRow.name == old).values(name=name, created_at=now, updated_at=now)
    rowcount(session, moved)
    session.flush()


def room_for(session: Session, key_ids: Sequence[str], limit: int) -> bool:
    """Whether each of ``key_ids`` (locked, KeyNotFound when missing) may hold as many more aliases
    besides its name as it appears in ``key_ids`` without passing ``limit``."""
    for key_id in set(key_ids):
        name = session.scalar(select(KeyRow.name).where(KeyRow.id == key_id).with_for_update())
        if name is None:
            raise errors.KeyNotFound()
        held = session.scalars(select(KeyAliasRow.name).where(KeyAliasRow.key_id == key_id, KeyAliasRow.name != name))
        if len(list(held)) + key_ids.count(key_id) > limit:
            return False
    return True


def update_keys(session: Session, condition: ColumnElement[bool], values: dict[str, Any]) -> int:
    """Update the key rows matching ``condition`` with ``values`` (by attribute name: a column may be
    named otherwise, as ``lifecycle`` is ``kmip_lifecycle``); the number of rows updated."""
    by_column = {getattr(KeyRow, name): value for name, value in values.items()}
    return rowcount(session, update(KeyRow).where(condition).values(by_column))


def refusal(session: Session, key_id: str, conflict: str) -> errors.KeyManagerError:
    """KeyNotFound when key ``key_id`` does not exist, else Conflict saying ``conflict``."""
    if session.scalar(select(KeyRow.id).where(KeyRow.id == key_id)) is None:
        return errors.KeyNotFound()
    return errors.Conflict(conflict)
