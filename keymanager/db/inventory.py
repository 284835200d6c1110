"""What the metrics and the console's reads take of the database: connections in use, keys by
state, every key's tags, the keys' last uses in the newest audit records, the database server's
facts (cheap, read-only)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, func, select, text

from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import AuditRecordRow, KeyRow, KeyTagRow
from keymanager.domain.audit import Outcome


class Inventory:
    """Counts for ``/metrics`` and the console's reads over one engine; safe to share between threads."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def connections_in_use(self) -> int:
        """Connections checked out of this process's pool now (0 for a pool that keeps none)."""
        checked_out = getattr(self._engine.pool, "checkedout", None)
        return int(checked_out()) if callable(checked_out) else 0

    def keys_by_state(self) -> dict[str, int]:
        """The number of keys in each state that has any (one grouped count); ``DatabaseUnavailable``."""
        with connection_errors_as_unavailable(), self._engine.connect() as connection:
            rows = connection.execute(select(KeyRow.state, func.count()).group_by(KeyRow.state))
            return {str(state): int(count) for state, count in rows}

    def tags(self) -> dict[str, dict[str, str]]:
        """Every key's tags (at most 50 a key), by key id, each ordered by tag key."""
        statement = select(KeyTagRow.key_id, KeyTagRow.tag_key, KeyTagRow.tag_value).order_by(
            KeyTagRow.key_id, KeyTagRow.tag_key
        )
        found: dict[str, dict[str, str]] = {}
        with connection_errors_as_unavailable(), self._engine.connect() as connection:
            for key_id, tag_key, tag_value in connection.execute(statement):
                found.setdefault(str(key_id), {})[str(tag_key)] = str(tag_value)
        return found

    def last_uses(self, actions: Collection[str], window: int) -> dict[str, datetime]:
        """The time of each key's newest successful record whose action is one of ``actions``,
        among the ``window`` newest records of the log (one bounded read), by key id."""
        newest = (
            select(AuditRecordRow.key_id, AuditRecordRow.time, AuditRecordRow.action, AuditRecordRow.outcome)
            .order_by(AuditRecordRow.position.desc())
            .limit(window)
            .subquery()
        )
        statement = (
            select(newest.c.key_id, func.max(newest.c.time))
            .where(newest.c.key_id.is_not(None), newest.c.outcome == Outcome.OK.value)
            .where(newest.c.action.in_(sorted(actions)))
            .group_by(newest.c.key_id)
        )
        with connection_errors_as_unavailable(), self._engine.connect() as connection:
            return {str(key_id): _utc(time) for key_id, time in connection.execute(statement)}

    def database(self) -> dict[str, Any]:
        """The database server: its dialect and version; on PostgreSQL, whether it is a standby
        (``pg_is_in_recovery``) and the standbys streaming from it that this role may see."""
        dialect = self._engine.dialect
        facts: dict[str, Any] = {"dialect": dialect.name, "driver": dialect.driver}
        with connection_errors_as_unavailable(), self._engine.connect() as connection:
            if dialect.name == "postgresql":
                facts["version"] = connection.execute(text("SHOW server_version")).scalar_one()
                facts["standby"] = bool(connection.execute(text("SELECT pg_is_in_recovery()")).scalar_one())
                rows = connection.execute(text("SELECT application_name, state, sync_state FROM pg_stat_replication"))
                facts["replicas"] = [{"name": r[0], "state": r[1], "sync": r[2]} for r in rows]
            elif dialect.name == "sqlite":
                facts["version"] = connection.execute(text("SELECT sqlite_version()")).scalar_one()
        return facts


def _utc(time: datetime) -> datetime:
    """A time as read back, in UTC (SQLite keeps no offset: stored in UTC)."""
    return time if time.tzinfo is not None else time.replace(tzinfo=UTC)
