"""Every error the SDK raises.

Hierarchy::

    KeyManagerError
    ├── ConfigurationError             (also a ValueError) a bad URL, a missing CA/certificate/token file;
    │                                  raised when the client is built, before anything is sent
    ├── TransportError                 no answer: connection refused or reset, TLS failure, timeout; the
    │                                  message names the method, host, port and path (and hints at a fix)
    ├── EnvelopeError                  a malformed envelope (bad magic, version, algorithm, header)
    ├── ApprovalPending                202 pending_approval: a guarded call (dual control) was not run; it
    │                                  waits as approval request ``request_id``: send it again once approved
    └── APIError                       the service answered with an error (status, code, message, request_id)
        ├── InvalidRequest             400/422 invalid_request
        ├── DecryptionFailed           400 decryption_failed (also: any envelope or stream authentication failure)
        ├── Unauthenticated            401 unauthenticated
        ├── Forbidden                  403 forbidden
        ├── NotFound                   404 not_found
        │   └── KeyNotFound            404 key_not_found
        ├── Conflict                   409 conflict
        ├── KeyDisabled                409 key_disabled
        ├── KeyPendingDeletion         409 key_pending_deletion
        ├── KeyDestroyed               409 key_destroyed
        ├── VersionBelowMinimum        409 version_below_minimum
        ├── PreconditionFailed         412 precondition_failed (If-Match names an older state of the key)
        ├── PayloadTooLarge            413 payload_too_large
        ├── RateLimited                429 rate_limited
        ├── HsmUnavailable             503 hsm_unavailable
        └── DatabaseUnavailable        503 database_unavailable

An error code the SDK does not know becomes a plain ``APIError``. ``ApprovalPending`` is not an
``APIError``: the service did not refuse the call, it holds it until others approve it. Transport
errors are raised ``from`` the httpx exception that caused them. Messages never carry plaintext or
key material.
"""

from __future__ import annotations

from datetime import datetime


def _named(key: str | None, principal: str | None) -> str:
    return "".join(f" [{what} {name!r}]" for what, name in (("key", key), ("principal", principal)) if name)


class KeyManagerError(Exception):
    """Base of every exception raised by ``keymanager_sdk``."""


class ConfigurationError(KeyManagerError, ValueError):
    """The client's settings are unusable (a URL without scheme or host, a file that cannot be read)."""


class TransportError(KeyManagerError):
    """The service could not be reached or did not answer in time (after any retries)."""


class EnvelopeError(KeyManagerError):
    """The input is not an envelope this SDK can read (before any authentication is attempted)."""


class ApprovalPending(KeyManagerError):
    """A guarded call (dual control: ``key.delete``, ``principal.admin`` …) was not run: the service
    answered 202 ``pending_approval`` and holds it as an approval request until enough approvers
    approve it (``KeyManager.approve``). Once the request is approved, send the identical call
    again: it runs then, exactly once. Nothing is retried or re-sent by the SDK.

    Attributes: ``request_id`` (the approval request's id, for ``get_approval`` / ``approve``; not
    an HTTP request id), ``operations`` (the guarded operations the call needs approved),
    ``approvals_required``, ``expires_at`` (after it the request expires and the call must start a
    new one), ``key`` and ``principal`` (what the held call names, else None).
    """

    def __init__(
        self,
        request_id: str,
        operations: tuple[str, ...],
        approvals_required: int,
        expires_at: datetime,
        key: str | None = None,
        principal: str | None = None,
    ) -> None:
        self.request_id = request_id
        self.operations = operations
        self.approvals_required = approvals_required
        self.expires_at = expires_at
        self.key = key
        self.principal = principal
        super().__init__(
            f"the call awaits approval: approval request {request_id} ({', '.join(operations)}){self.about} needs "
            f"{approvals_required} approval(s) before {expires_at.isoformat()}; once it is approved, send the "
            "same call again"
        )

    @property
    def about(self) -> str:
        """`` [key 'cards']`` / `` [principal 'billing']`` when the held call names one, else ``""``."""
        return _named(self.key, self.principal)


class APIError(KeyManagerError):
    """The service answered with an error body ``{"error": {"code", "message"}, "request_id"}``.

    Attributes: ``status`` (HTTP status), ``code`` (API error code), ``message`` (the service's
    message), ``request_id`` (for the service's logs and audit records; may be empty), ``key``
    and ``principal`` (the key reference or principal name the call named, else None; the text
    of the error names them too, e.g. ``404 key_not_found: key not found [key 'cards']``).
    """

    code_name: str | None = None
    default_status = 500

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str = "",
        key: str | None = None,
        principal: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.key = key
        self.principal = principal
        request = f" (request {request_id})" if request_id else ""
        super().__init__(f"{status} {code}: {message}{self.about}{request}")

    @property
    def about(self) -> str:
        """`` [key 'cards']`` / `` [principal 'billing']`` for an error of a call that names one, else ``""``."""
        return _named(self.key, self.principal)


class InvalidRequest(APIError):
    code_name = "invalid_request"
    default_status = 400


class DecryptionFailed(APIError):
    """Any decryption failure; the message never says why (no padding or tag oracle)."""

    code_name = "decryption_failed"
    default_status = 400

    @classmethod
    def local(cls) -> DecryptionFailed:
        """The error for a failure found by the SDK itself (envelope segment, stream end)."""
        return cls(400, "decryption_failed", "decryption failed")


class Unauthenticated(APIError):
    code_name = "unauthenticated"
    default_status = 401


class Forbidden(APIError):
    code_name = "forbidden"
    default_status = 403


class NotFound(APIError):
    code_name = "not_found"
    default_status = 404


class KeyNotFound(NotFound):
    code_name = "key_not_found"


class Conflict(APIError):
    code_name = "conflict"
    default_status = 409


class KeyDisabled(APIError):
    code_name = "key_disabled"
    default_status = 409


class KeyPendingDeletion(APIError):
    code_name = "key_pending_deletion"
    default_status = 409


class KeyDestroyed(APIError):
    code_name = "key_destroyed"
    default_status = 409


class VersionBelowMinimum(APIError):
    code_name = "version_below_minimum"
    default_status = 409


class PreconditionFailed(APIError):
    """The key changed since the ``etag`` given as ``if_match``: read it again and redo the change."""

    code_name = "precondition_failed"
    default_status = 412


class PayloadTooLarge(APIError):
    code_name = "payload_too_large"
    default_status = 413


class RateLimited(APIError):
    code_name = "rate_limited"
    default_status = 429


class HsmUnavailable(APIError):
    code_name = "hsm_unavailable"
    default_status = 503


class DatabaseUnavailable(APIError):
    code_name = "database_unavailable"
    default_status = 503


_BY_CODE: dict[str, type[APIError]] = {
    cls.code_name: cls
    for cls in (
        InvalidRequest,
        DecryptionFailed,
        Unauthenticated,
        Forbidden,
        NotFound,
        KeyNotFound,
        Conflict,
        KeyDisabled,
        KeyPendingDeletion,
        KeyDestroyed,
        VersionBelowMinimum,
        PreconditionFailed,
        PayloadTooLarge,
        RateLimited,
        HsmUnavailable,
        DatabaseUnavailable,
    )
    if cls.code_name is not None
}


def api_error(
    status: int | None,
    code: str,
    message: str,
    request_id: str = "",
    key: str | None = None,
    principal: str | None = None,
) -> APIError:
    """The ``APIError`` subclass for ``code`` (plain ``APIError`` for an unknown code), carrying the
    ``key`` reference or ``principal`` name the call named.

    ``status`` None (an error of one item of a batch) takes the code's usual HTTP status.
    """
    cls = _BY_CODE.get(code, APIError)
    return cls(cls.default_status if status is None else status, code, message, request_id, key, principal)
