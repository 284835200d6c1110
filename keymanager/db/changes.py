"""How every change of the metadata ends, whichever repository makes it.

In the change's own transaction, :func:`record_change` bumps the metadata version (the caches of
every process and replica notice at their next check) and appends the change's audit record
to the chain, sealed with the audit key the repository's sessions carry (:func:`sessions`).
So a change and its record commit together or not at all.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Engine, Executable, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session, sessionmaker

from keymanager.db.audit import append as append_audit
from keymanager.db.models import MetadataVersionRow
from keymanager.domain.audit import AuditEntry, ChainKey

_AUDIT_KEY = "audit_key"
"""Where a session finds its repository's audit key (``Session.info``)."""


def sessions(engine: Engine, audit_key: ChainKey | None) -> sessionmaker[Session]:
    """The session factory of a repository over ``engine`` whose changes are sealed with ``audit_key``."""
    return sessionmaker(engine, expire_on_commit=False, info={_AUDIT_KEY: audit_key})


def record_change(session: Session, entry: AuditEntry | None) -> None:
    """Close a change: bump the metadata version (caches everywhere notice) and record ``entry``."""
    session.execute(
        update(MetadataVersionRow).where(MetadataVersionRow.id == 1).values(version=MetadataVersionRow.version + 1)
    )
    if entry is not None:
        append_audit(session.connection(), [entry], session.info.get(_AUDIT_KEY))


def record_only(session: Session, entry: AuditEntry | None) -> None:
    """Record ``entry`` in the change's transaction without bumping the metadata version: for changes no
    cache holds (approval requests and rules, ``db/approvals.py``), so that reads validated against the
    metadata version (``run_validated``) are not run again because of them."""
    if entry is not None:
        append_audit(session.connection(), [entry], session.info.get(_AUDIT_KEY))


def rowcount(session: Session, statement: Executable) -> int:
    """Execute an UPDATE or DELETE without touching loaded objects; rows matched."""
    result = session.execute(statement, execution_options={"synchronize_session": False})
    return cast("CursorResult[Any]", result).rowcount
