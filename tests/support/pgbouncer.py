"""A PgBouncer of the test's own (Debian package ``pgbouncer``), in transaction mode, in front of
a PostgreSQL server: every database of the server, logged in as ``postgres``."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.conftest import free_port
from tests.support.private_postgres import as_postgres, run_as_postgres

CONFIG = """[databases]
* = host={host} port={port} user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = {pool}
max_client_conn = 200
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {log}
"""


@dataclass(frozen=True)
class Bouncer:
    """A running PgBouncer: its port and its log."""

    port: int
    pool_size: int
    log: Path

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` through this PgBouncer."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"


@contextlib.contextmanager
def pgbouncer(host: str, port: int, *, pool_size: int = 2) -> Iterator[Bouncer]:
    """PgBouncer in transaction mode in front of ``host:port``, at most ``pool_size`` server
    connections per database, until the block ends."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    home = Path(tempfile.mkdtemp(prefix="km-pgbouncer-"))
    listen = free_port()
    log = home / "pgbouncer.log"
    config = home / "pgbouncer.ini"
    config.write_text(CONFIG.format(host=host, port=port, listen=listen, pool=pool_size, log=log))
    run_as_postgres(home)  # PgBouncer refuses to run as root
    process = subprocess.Popen(
        [*as_postgres(), binary, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        _wait_listening(listen, process, log)
        yield Bouncer(port=listen, pool_size=pool_size, log=log)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"pgbouncer exited {process.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise AssertionError("pgbouncer did not listen in 30 s")
