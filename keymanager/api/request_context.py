"""The request context: a request id (and W3C trace context) on every request, response and log
line, and the access log line (used by the one ASGI layer, ``api/gateway.py``).

A client's ``X-Request-ID`` is kept when it is 1-64 characters of ``[A-Za-z0-9._-]``, else
replaced by one of ours; a ``traceparent`` is kept when it is valid per W3C Trace Context
(``version-traceid-parentid-flags``, lower-case hex, no all-zero ids, version ``ff`` invalid),
else dropped. Both are echoed on the response and appear in the logs and the audit record.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.types import Scope

from keymanager.api.logs import ACCESS_LOGGER, request_fields

CREDENTIAL = "credential"
"""Where in ``scope["state"]`` the front door puts the credential it accepted (``api/front_door.py``)."""
_PROCESS_PREFIX = secrets.token_hex(8)
_SEQUENCE = itertools.count()


def _new_prefix_after_fork() -> None:
    global _PROCESS_PREFIX
    _PROCESS_PREFIX = secrets.token_hex(8)


os.register_at_fork(after_in_child=_new_prefix_after_fork)


def next_request_id() -> str:
    """A request id: 32 hex digits, a random per-process prefix and a counter (uuid4 per request
    costs a system call; ids need to be unique, not secret)."""
    return f"{_PROCESS_PREFIX}{next(_SEQUENCE) & 0xFFFF_FFFF_FFFF_FFFF:016x}"


REQUEST_ID_HEADER = b"x-request-id"
TRACEPARENT_HEADER = b"traceparent"
_REQUEST_ID = re.compile(rb"[A-Za-z0-9._-]{1,64}")
_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?", re.DOTALL)
access_log = logging.getLogger(ACCESS_LOGGER)


def client_request_id(value: bytes | None) -> str | None:
    """The client's ``X-Request-ID`` when it is 1-64 characters of ``[A-Za-z0-9._-]``; else None."""
    if value is not None and _REQUEST_ID.fullmatch(value):
        return value.decode()
    return None


def valid_traceparent(value: bytes | None) -> str | None:
    """The W3C ``traceparent`` header when valid (its first four fields for a later version); else None.

    Version ``00`` is exactly ``00-<32 hex>-<16 hex>-<2 hex>``; a later version (``01``-``fe``) may
    carry more fields after a ``-``, which are not kept; ids of all zeros and upper case are invalid.
    """
    if value is None or len(value) > 512:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace_id, parent_id, _, rest = match.groups()
    if version == b"ff" or (version == b"00" and rest is not None):
        return None
    if trace_id == b"0" * 32 or parent_id == b"0" * 16:
        return None
    return value[:55].decode()


def request_ids(headers: Mapping[bytes, bytes]) -> tuple[str, str | None]:
    """The request's id (the client's when valid, else a new one) and its valid ``traceparent``
    (or None), from its ``headers`` (names in lower case, the first of each name)."""
    request_id = client_request_id(headers.get(REQUEST_ID_HEADER)) or next_request_id()
    return request_id, valid_traceparent(headers.get(TRACEPARENT_HEADER))


def response_ids(request_id: str, traceparent: str | None) -> list[tuple[bytes, bytes]]:
    """The headers echoing the request's ids on its answer."""
    if traceparent is None:
        return [(REQUEST_ID_HEADER, request_id.encode())]
    return [(REQUEST_ID_HEADER, request_id.encode()), (TRACEPARENT_HEADER, traceparent.encode())]


def log_access(scope: Scope, status: int, started_at: float) -> None:
    """The access log line of the request ``scope``, answered with ``status`` (``started_at``: its
    ``time.perf_counter()`` when it came)."""
    duration_ms = round((time.perf_counter() - started_at) * 1000, 3)
    fields = {**request_fields(scope), "status": status, "duration_ms": duration_ms}
    access_log.info("%s %s %d", scope["method"], fields.get("route") or fields.get("path"), status, extra=fields)


@dataclass(frozen=True)
class RouteLabel:
    """What the request metrics label a call of a door that routes itself (the KMS and XKS doors)
    with: ``scope["route"].path``, the call's action."""

    path: str
