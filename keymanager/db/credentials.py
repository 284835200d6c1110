"""Every stored credential, by the name a request presents it under: what the failed-authentication
throttle's index (``services/credential_index.py``) is built from (read-only, a few columns)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import InstrumentedAttribute

from keymanager.db import principal_credentials
from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import (
    AccessKeyRow,
    AppRoleCredentialRow,
    AppRoleTokenRow,
    MetadataVersionRow,
    PrincipalRow,
)
from keymanager.domain.credential_kinds import CERTIFICATE_SUBJECT

_VERSION = select(MetadataVersionRow.__table__.c.version).where(MetadataVersionRow.__table__.c.id == 1)


@dataclass(frozen=True)
class StoredCredentials:
    """The credentials stored under metadata ``version``; ``complete`` is False when there were more
    than the limit asked for (then each list holds at most that many)."""

    version: int
    token_hashes: list[str]
    cert_subjects: list[str]
    access_key_ids: list[str]
    complete: bool


class CredentialReader:
    """Reads of the credentials' names over one engine; safe to share between threads."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def version(self) -> int:
        """The current metadata version (one single-row read); ``DatabaseUnavailable``."""
        with connection_errors_as_unavailable(), self._engine.connect() as connection:
            return int(connection.execute(_VERSION).scalar_one())

    def credentials(self, limit: int) -> StoredCredentials:
        """The names of at most ``limit`` credentials of each kind, with the metadata version read
        before them (so they are at least that new); ``DatabaseUnavailable``."""
        with connection_errors_as_unavailable(), self._engine.connect() as connection:
            version = int(connection.execute(_VERSION).scalar_one())
            # Bearer tokens, and the Transit door's secrets presented as such: AppRole client tokens, and
            # AppRole secret ids (what a login from a throttled address is vouched for by).
            tokens = [
                *_column(connection, PrincipalRow.token_hash, limit + 1),
                *_column(connection, AppRoleTokenRow.token_hash, limit + 1),
                *_column(connection, AppRoleCredentialRow.secret_hash, limit + 1),
            ][: limit + 1]
            subjects = principal_credentials.names(connection, CERTIFICATE_SUBJECT, limit + 1)
            access_keys = _column(connection, AccessKeyRow.id, limit + 1)
        complete = max(len(tokens), len(subjects), len(access_keys)) <= limit
        return StoredCredentials(version, tokens[:limit], subjects[:limit], access_keys[:limit], complete)


def _column(connection: Connection, column: InstrumentedAttribute[Any], limit: int) -> list[str]:
    statement = select(column).where(column.isnot(None)).limit(limit)
    return [str(value) for value in connection.execute(statement).scalars()]
