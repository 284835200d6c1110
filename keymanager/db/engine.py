"""Engines for the metadata store: an embedded SQLite file or a shared PostgreSQL."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from keymanager import errors

logger = logging.getLogger(__name__)
T = TypeVar("T")

_SQLITE_PRAGMAS = (
    "PRAGMA busy_timeout=5000",
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=NORMAL",
)


def make_engine(url: str, *, prepared_statements: bool = True) -> Engine:
    """An engine for ``url`` (``sqlite:///…`` or ``postgresql+psycopg://…``).

    SQLite: the file's directory (mode 0700) and the file (mode 0600, so the WAL and shared
    memory files SQLite makes beside it are 0600 too) are created, and every connection gets WAL,
    foreign keys, a 5 s busy timeout and ``synchronous=NORMAL``.
    PostgreSQL: a pool of 10 (+20 overflow) connections, not pinged before use (a round trip per
    checkout): a connection found dead invalidates the pool's older ones, and reads made through
    :func:`read_retrying` run once more on a new one. ``prepared_statements``: psycopg prepares
    the statements a connection runs often (false behind a transaction pooler that cannot keep
    them, such as PgBouncer before 1.21).
    Connecting is lazy: an unreachable database is noticed on first use.
    Raises ``ValueError`` for any other kind of database.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    if parsed.get_backend_name() == "postgresql":
        connect_args = {} if prepared_statements else {"prepare_threshold": None}
        return create_engine(parsed, pool_size=10, max_overflow=20, connect_args=connect_args)
    raise ValueError(f"unsupported database {parsed.get_backend_name()!r}: use sqlite or postgresql+psycopg")


def _sqlite_engine(url: URL) -> Engine:
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        _create_private(Path(database).expanduser())
    engine = create_engine(url)
    event.listen(engine, "connect", _set_sqlite_pragmas)
    return engine


def _create_private(path: Path) -> None:
    """Create the database file readable and writable by its owner only, in a directory only its
    owner can enter, unless they exist (an existing file or directory keeps its mode)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        for pragma in _SQLITE_PRAGMAS:
            _execute_when_unlocked(cursor, pragma)
    finally:
        cursor.close()


def _execute_when_unlocked(cursor: Any, statement: str, timeout: float = 5.0) -> None:
    """Run ``statement``, trying again for up to ``timeout`` seconds while the database is locked.

    Switching a new database file to WAL needs it alone, and SQLite answers "database is locked"
    at once, without waiting in its busy handler, while another connection holds a lock (two
    workers starting on a blank database at the same moment).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            cursor.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@contextmanager
def connection_errors_as_unavailable() -> Iterator[None]:
    """Turn a failure to reach the database, or a lost connection, into ``DatabaseUnavailable``.

    The raised error names neither the URL nor the password and hides the
    driver's exception (``from None``); the cause is logged by class and driver
    message. Every other error passes through unchanged.
    """
    try:
        yield
    except (OperationalError, InterfaceError, PoolTimeout) as exc:
        raise _unavailable(exc) from None
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
        raise _unavailable(exc) from None


def read_retrying(engine: Engine, read: Callable[[Connection], T]) -> T:
    """``read(connection)`` on a connection of ``engine``'s pool; when the connection turns out to
    be dead (the server restarted since it was last used), once more on a new one. Only for
    reads: nothing they did can have been half done. Errors as :func:`connection_errors_as_unavailable`."""
    with connection_errors_as_unavailable():
        try:
            with engine.connect() as connection:
                return read(connection)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        with engine.connect() as connection:
            return read(connection)


def _unavailable(exc: Exception) -> errors.DatabaseUnavailable:
    cause = getattr(exc, "orig", None) or exc
    logger.warning("database unavailable: %s: %s", type(cause).__name__, cause)
    return errors.DatabaseUnavailable()
