"""How the KMIP door refuses a batch item (or a whole message): a Result Reason, a message, and the
status of its audit record; and the reason of each of the services' errors."""

from __future__ import annotations

from keymanager import errors
from keymanager.doors.kmip.spec import ResultReason

Reason = ResultReason
MAX_MESSAGE_CHARS = 200
"""Longest result message: whatever a refusal says, it is cut here (no client data is put in one)."""
NO_OBJECT = "no object with this unique identifier (or not one the principal may see)"


class KmipRefusal(Exception):
    """A batch item (or a whole message) refused with ``reason`` and ``message``."""

    def __init__(self, reason: ResultReason, message: str, status: int = 400, *, lifecycle: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message[:MAX_MESSAGE_CHARS].encode("ascii", "replace").decode("ascii")
        """Cut, and ASCII (the codec writes a text string a byte per character)."""
        self.status = status
        """The HTTP-like status of its audit record (403 refused, 404 not found, 400 bad, 5xx ours)."""
        self.lifecycle = lifecycle
        """Refused for the object's lifecycle state: see :meth:`in_version`."""

    def in_version(self, version: tuple[int, int]) -> KmipRefusal:
        """The refusal as answered in ``version``: KMIP 2.0 has its own reason for an object in the wrong
        state (``Wrong Key Lifecycle State``), which 1.x lacks (there: ``Permission Denied``, as PyKMIP's
        server answers)."""
        if not self.lifecycle or version < (2, 0):
            return self
        return KmipRefusal(Reason.WRONG_KEY_LIFECYCLE_STATE, self.message, self.status)


def not_supported(what: str) -> KmipRefusal:
    return KmipRefusal(Reason.OPERATION_NOT_SUPPORTED, what, 501)


def invalid(what: str) -> KmipRefusal:
    return KmipRefusal(Reason.INVALID_FIELD, what, 400)


def denied(what: str) -> KmipRefusal:
    return KmipRefusal(Reason.PERMISSION_DENIED, what, 403)


def carried(data: bytes | None) -> bytes:
    """A request's data; Missing Data, before anything is looked up, when it carries none."""
    if data is None:
        raise KmipRefusal(Reason.MISSING_DATA, "the request carries no data")
    return bytes(data)


def wrong_state(what: str) -> KmipRefusal:
    """Refused for the object's lifecycle state (Permission Denied in 1.x, Wrong Key Lifecycle State in 2.0)."""
    return KmipRefusal(Reason.PERMISSION_DENIED, what, 409, lifecycle=True)


_REASONS: tuple[tuple[type[errors.KeyManagerError], ResultReason], ...] = (
    (errors.ApprovalPending, Reason.PERMISSION_DENIED),  # not run: its message names the approval request
    (errors.DecryptionFailed, Reason.CRYPTOGRAPHIC_FAILURE),
    (errors.Unauthenticated, Reason.AUTHENTICATION_NOT_SUCCESSFUL),
    (errors.Forbidden, Reason.PERMISSION_DENIED),
    (errors.NotFound, Reason.ITEM_NOT_FOUND),
    (errors.KeyDisabled, Reason.PERMISSION_DENIED),
    (errors.KeyPendingDeletion, Reason.PERMISSION_DENIED),
    (errors.KeyDestroyed, Reason.PERMISSION_DENIED),
    (errors.KeyPendingImport, Reason.PERMISSION_DENIED),
    (errors.VersionBelowMinimum, Reason.PERMISSION_DENIED),
    (errors.Conflict, Reason.ILLEGAL_OPERATION),
    (errors.PreconditionFailed, Reason.ILLEGAL_OPERATION),
    (errors.PayloadTooLarge, Reason.INVALID_FIELD),
    (errors.MissingField, Reason.MISSING_DATA),
    (errors.InvalidRequest, Reason.INVALID_FIELD),
)


_LIFECYCLE = (errors.KeyDisabled, errors.KeyPendingDeletion, errors.KeyDestroyed, errors.KeyPendingImport)
"""The service's errors of a key's state."""


def refusal_of(exc: errors.KeyManagerError) -> KmipRefusal:
    """The KMIP result of a service's error: its reason, its message (the service's own words)."""
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return KmipRefusal(reason, exc.message, exc.status, lifecycle=isinstance(exc, _LIFECYCLE))
    return KmipRefusal(Reason.GENERAL_FAILURE, exc.message, exc.status)
