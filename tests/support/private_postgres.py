"""A PostgreSQL server of the test's own (``initdb`` in a temporary directory, its own port), for
the tests that stop and start the server under load: the machine's PostgreSQL is shared and
never restarted. Run as the ``postgres`` user when the tests run as root (PostgreSQL refuses root).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from tests.e2e.conftest import free_port

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
"""Debian's PostgreSQL binaries, newest first."""


def _binary(name: str) -> str:
    for directory in BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"no PostgreSQL {name} under /usr/lib/postgresql/*/bin or on PATH")
    return found


def as_postgres() -> list[str]:
    """The prefix that runs a command as the ``postgres`` user when this process is root (``setpriv``
    execs it: the process started is the command itself, and takes its signals)."""
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] if os.geteuid() == 0 else []


def run_as_postgres(*paths: Path) -> None:
    """Hand ``paths`` to the ``postgres`` user when this process is root (what it runs writes there)."""
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in paths:
            os.chown(path, user.pw_uid, user.pw_gid)


@dataclass
class PrivatePostgres:
    """A running private server: its data directory, port, and the postmaster."""

    data: Path
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None)

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of its ``postgres`` database."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start the postmaster and wait until it takes connections (60 s)."""
        command = [*as_postgres(), _binary("postgres"), "-D", str(self.data), "-p", str(self.port)]
        command += ["-k", str(self.data), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=60"]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.OperationalError):
                psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres").close()
                return
            if self.process.poll() is not None:
                raise AssertionError(f"private postgres exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        raise AssertionError("private postgres did not start in 60 s")

    def stop(self, *, immediate: bool = False) -> None:
        """Stop the postmaster: a fast shutdown, or an immediate one (no checkpoint: what a crash
        leaves, recovered from the WAL at the next start)."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGQUIT if immediate else signal.SIGINT)
        self.process.wait(timeout=60)
        self.process = None

    def create_database(self, name: str) -> str:
        """Create database ``name``; its SQLAlchemy URL."""
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A fresh private server, started; stopped and removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="km-private-pg-"))
    data = root / "data"
    data.mkdir()
    log = root / "postgres.log"
    log.touch()
    run_as_postgres(root, data, log)
    initdb = [*as_postgres(), _binary("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
    subprocess.run(initdb, check=True, capture_output=True, timeout=120)
    server = PrivatePostgres(data=data, port=free_port(), log=log)
    try:
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
