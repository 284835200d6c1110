"""The service's log lines: JSON (one object per line) or text, with the request's fields on every line.

Every record logged while a request runs carries that request's ``request_id``, ``traceparent``
(when the client sent a valid one), ``principal_id`` (once authenticated), ``method`` and
``route`` (the route template; for a request refused before routing, the first ``MAX_PATH``
characters of its ``path``; never the query), read from the request's ASGI scope
through a context variable set by the gateway (``api/gateway.py``). With
``KM_ACCESS_LOG=true`` the gateway also writes one line per request on the
``keymanager.access`` logger with its ``status`` and ``duration_ms``.

Nothing secret is put on a log line here: no header but the two ids above, no body, no query.
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter
from starlette.types import Scope

ACCESS_LOGGER = "keymanager.access"
LOGGERS = ("keymanager", "uvicorn")
"""Loggers whose lines go to stderr in the configured format (uvicorn's own access log stays off)."""
_HANDLER = "keymanager-stderr"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_PATH = 128
"""A request that matched no route is logged with the first this many characters of its path."""

_REQUEST: ContextVar[Scope | None] = ContextVar("km_request", default=None)


class request_scope:  # a class, as contextlib's suppress: cheaper than a generator, once per request
    """Within the block ``with request_scope(scope):``, records logged carry the fields of the request ``scope``."""

    __slots__ = ("scope", "token")

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.token: Token[Scope | None] | None = None

    def __enter__(self) -> None:
        self.token = _REQUEST.set(self.scope)

    def __exit__(self, *exc_info: object) -> None:
        assert self.token is not None
        _REQUEST.reset(self.token)


def request_fields(scope: Scope | None = None) -> dict[str, Any]:
    """The log fields of the request ``scope`` (default: the current request's; empty outside one)."""
    scope = scope if scope is not None else _REQUEST.get()
    if scope is None:
        return {}
    state = scope.get("state", {})
    fields: dict[str, Any] = {"request_id": state.get("request_id"), "method": scope.get("method")}
    route = getattr(scope.get("route"), "path", None)
    for name, value in (
        ("route", route),
        ("path", str(scope["path"])[:MAX_PATH] if route is None and scope.get("path") else None),
        ("principal_id", state.get("principal_id")),
        ("traceparent", state.get("traceparent")),
    ):
        if value is not None:
            fields[name] = value
    return fields


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to whatever ``sys.stderr`` is when a record comes (as logging's last resort)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class RequestFieldsFilter(logging.Filter):
    """Adds the current request's fields to each record (never overriding a field the call gave)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in request_fields().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


def utc_time(record: logging.LogRecord) -> str:
    """The record's time in ISO 8601, UTC, to the millisecond."""
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonLines(JsonFormatter):
    """``{"time", "level", "logger", "message", …the request's fields and any ``extra``}``, one per line."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_time(record)


class TextLines(logging.Formatter):
    """``time LEVEL logger: message`` and the request's fields as ``name=value`` pairs."""

    _FIELDS = ("request_id", "traceparent", "principal_id", "method", "route", "path", "status", "duration_ms")

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_time(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = [f"{name}={getattr(record, name)}" for name in self._FIELDS if getattr(record, name, None) is not None]
        return f"{line} [{' '.join(pairs)}]" if pairs else line


def configure(level: str, log_format: str, access_log: bool) -> None:
    """Send the service's records (and uvicorn's) to stderr as ``log_format`` (``json`` or ``text``).

    Idempotent: a second call replaces the handler the first installed. ``access_log`` lets the
    per-request lines of ``keymanager.access`` through whatever ``level`` is.
    """
    handler = StderrHandler()
    handler.setFormatter(JsonLines() if log_format == "json" else TextLines())
    handler.addFilter(RequestFieldsFilter())
    handler.set_name(_HANDLER)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if h.get_name() == _HANDLER]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(level.upper())
    access = logging.getLogger(ACCESS_LOGGER)
    access.setLevel(logging.INFO if access_log else logging.CRITICAL + 1)
