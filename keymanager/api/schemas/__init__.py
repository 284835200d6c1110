"""Request and response bodies of API v1: what every body is built of, and the error answer.

Here: the strict request :class:`Body`, the field types every route shares (ISO 8601 times,
decimal query numbers, encryption contexts, strict base64), the one error body and the OpenAPI
``responses`` that document it. The bodies of each group of routes are in this package's modules:
:mod:`~keymanager.api.schemas.health`, :mod:`~keymanager.api.schemas.principals`,
:mod:`~keymanager.api.schemas.keys`, :mod:`~keymanager.api.schemas.crypto` (symmetric
cryptography and MACs) and :mod:`~keymanager.api.schemas.asymmetric` (public keys, signatures,
key agreement, data key pairs).
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from keymanager.errors import InvalidRequest

Context = dict[str, str]

_ISO_8601 = re.compile(r"\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}:?\d{2})?)?")
_DECIMAL = re.compile(r"[0-9]{1,18}")


def _iso_8601(value: object) -> object:
    """Only an ISO 8601 string (or a datetime) is a time: never a number, nor a string of one."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_8601.fullmatch(value):
        raise ValueError("must be an ISO 8601 date-time such as 2030-01-31T12:00:00Z")
    return value


def _decimal(value: object) -> object:
    """A query parameter that is a number: decimal digits only (no sign, point, exponent or spaces)."""
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise ValueError("must be a whole number written in decimal digits")
    return value


def _utc_if_naive(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


IsoTime = Annotated[datetime, Field(strict=False), BeforeValidator(_iso_8601), AfterValidator(_utc_if_naive)]
"""A timestamp: ISO 8601 text only (``since=0.5`` and ``"not_before": 5`` are refused); UTC when
it names no offset."""
QueryInt = Annotated[int, BeforeValidator(_decimal)]
"""A whole number in a query string: decimal digits only."""


class Body(BaseModel):
    """A request body: unknown fields refused, and strict types (a boolean is ``true``/``false``,
    never ``0`` or ``"yes"``; a number is a JSON number, never a string; an integer is never
    ``1.0``); enumerations take their documented values, times are ISO 8601 strings."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "message"}, "request_id"}`` and nothing else."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail
    request_id: str


class ItemError(BaseModel):
    error: ErrorDetail


def decode_base64(value: str, field: str) -> bytes:
    """Strict standard base64; InvalidRequest (never echoing the value) otherwise."""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{field} is not valid base64") from None


def encode_base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


_ERRORS = {
    400: "invalid_request or decryption_failed",
    401: "unauthenticated: no credentials, or a token or client certificate no principal holds",
    403: "forbidden: the principal's role or the key's policy does not allow this",
    404: "key_not_found or not_found",
    409: "conflict, key_disabled or key_pending_deletion",
    413: "payload_too_large: the request body is over the route's limit",
    422: "invalid_request: the body or a parameter does not have the documented shape and types",
    429: "rate_limited: too many failed authentications from this client address (see Retry-After)",
    503: "hsm_unavailable or database_unavailable",
}


_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for ``statuses``, each with the error body's schema."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        responses[status] = {"model": ErrorBody, "description": _ERRORS[status]}
        if status == 429:
            responses[status]["headers"] = _RETRY_AFTER
    return responses


ERROR_RESPONSES = error_responses(400, 401, 403, 404, 409, 413, 422, 429, 503)
"""What an authenticated route can answer besides success."""
OPEN_RESPONSES = error_responses(413, 429)
"""What a route anyone may call can answer besides its own statuses (checked before routing)."""
