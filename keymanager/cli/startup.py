"""What ``keymanager serve`` checks before it starts, and how it says that it serves.

Before uvicorn starts, the database is opened and migrated and the HSM token is logged into
(in a child process): a failure is one line naming the part and the cause, and exit code 1 —
never a traceback, never a PIN or a database password. "serving" is printed only once
``/v1/ready`` answers 200 on the listening port.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from keymanager.config import Settings

PROBE_TIMEOUT_SECONDS = 30
READY_POLL_SECONDS = 0.1


def problem_at_start(settings: Settings) -> str | None:
    """One line naming what keeps the service from starting (database, HSM), or ``None``."""
    return database_problem(settings) or _hsm_problem(settings)


def database_problem(settings: Settings) -> str | None:
    """One line naming why the database cannot be opened and migrated, or ``None`` (it now is)."""
    from keymanager.db import make_engine, migrate

    url = settings.resolved_database_url()
    try:
        engine = make_engine(url, prepared_statements=settings.database_prepared_statements)
    except ValueError as exc:
        return f"database: {exc}"
    said: list[str] = []
    try:
        with _logged_warnings(said):
            migrate(engine)
    except Exception as exc:  # any driver or migration failure: name it, without the URL's password
        cause = getattr(exc, "orig", None) or exc
        why = said[-1] if said else f"{type(cause).__name__}: {cause}"
        return f"database {redacted_url(url)}: {(why.strip().splitlines() or [''])[0]}"
    finally:
        engine.dispose()
    return None


@contextlib.contextmanager
def _logged_warnings(said: list[str]) -> Iterator[None]:
    """Collect what the service's loggers warn about (the database layer logs the driver's cause,
    never the URL) instead of printing it, so the start-up failure is one line."""

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger = logging.getLogger("keymanager")
    handler, propagate = Collect(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _hsm_problem(settings: Settings) -> str | None:
    if settings.is_softhsm:
        settings.export_softhsm_conf()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "keymanager.hsm.probe", settings.pkcs11_module, settings.pkcs11_token_label],
            input=settings.pin(),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
            env=os.environ.copy(),
        )
    except subprocess.TimeoutExpired:
        return f"HSM: no answer from {settings.pkcs11_module} within {PROBE_TIMEOUT_SECONDS} s"
    if run.returncode == 0:
        return None
    said = run.stdout.strip().splitlines()
    return "HSM: " + (said[-1] if said else f"the check failed (exit {run.returncode})")


def redacted_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return scheme + sep + rest


def announce_when_ready(url: str, message: str) -> threading.Thread:
    """Print ``message`` once ``url``/v1/ready answers 200 (checked on this machine's own listener)."""

    def wait() -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # our own listener on loopback: only its readiness is read
        while True:
            try:
                with urllib.request.urlopen(f"{url}/v1/ready", timeout=2, context=context) as answer:  # noqa: S310
                    if answer.status == 200:
                        print(message, flush=True)
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(READY_POLL_SECONDS)

    thread = threading.Thread(target=wait, name="km-announce", daemon=True)
    thread.start()
    return thread


def loopback(host: str) -> str:
    """The address to reach a listener bound to ``host`` from this machine."""
    return {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, f"[{host}]" if ":" in host else host)  # noqa: S104
