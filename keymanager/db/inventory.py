"""What the metrics read of the database: connections in use, keys by state (cheap, read-only)."""

from __future__ import annotations

from sqlalchemy import Engine, func, select

from keymanager.db.engine import connection_errors_as_unavailable
from keymanager.db.models import KeyRow


class Inventory:
    """Counts for ``/metrics`` over one engine; safe to share between threads."""

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
