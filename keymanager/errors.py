"""Errors of the service, each with the API error code and HTTP status it maps to.

Hierarchy::

    KeyManagerError
    ├── InvalidRequest            400 invalid_request
    │   ├── WrongKeyUsage         400 invalid_request (the key's usage does not allow the operation)
    │   ├── UnsupportedAlgorithm  400 invalid_request (an algorithm the key's spec and usage do not allow)
    │   ├── WrongDigestLength     400 invalid_request (a DIGEST message not as long as the algorithm's digest)
    │   ├── MessageTooLong        400 invalid_request (a RAW message or plaintext over the limit)
    │   ├── InvalidPeerKey        400 invalid_request (a peer public key that is malformed or of another curve)
    │   ├── UnsupportedByHsm      400 invalid_request (the HSM lacks a mechanism a spec or algorithm needs)
    │   └── MissingField          400 invalid_request (a field the operation needs is absent)
    ├── DecryptionFailed          400 decryption_failed (one message for every cause)
    │   └── UnknownKeyVersion     400 decryption_failed (the key as read has no such version)
    ├── Unauthenticated           401 unauthenticated
    ├── Forbidden                 403 forbidden
    ├── ApprovalPending           202 approval_pending (a guarded call awaits its approvals: not run)
    ├── NotFound                  404 not_found
    │   └── KeyNotFound           404 key_not_found
    ├── Conflict                  409 conflict
    ├── PreconditionFailed        412 precondition_failed (If-Match names an older state)
    ├── KeyDisabled               409 key_disabled
    ├── KeyPendingDeletion        409 key_pending_deletion
    ├── KeyDestroyed              409 key_destroyed
    ├── KeyPendingImport          409 key_pending_import
    ├── VersionBelowMinimum       409 version_below_minimum
    ├── PayloadTooLarge           413 payload_too_large
    ├── RateLimited               429 rate_limited (with Retry-After)
    ├── HsmUnavailable            503 hsm_unavailable
    │   └── KeyMaterialMissing    503 hsm_unavailable (a key version's object is not in the token)
    ├── DatabaseUnavailable       503 database_unavailable
    └── SpoolBusy                 503 spool_busy (with Retry-After)

Messages are fixed or built from public identifiers only: never plaintext,
ciphertext, key material, tokens or PINs.
"""

from __future__ import annotations


class KeyManagerError(Exception):
    """Base of every error the service answers with a JSON error body."""

    code = "internal_error"
    status = 500
    default_message = "internal error"
    retry_after: int | None = None
    """Seconds for a ``Retry-After`` header, for refusals that pass by themselves."""

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)


class InvalidRequest(KeyManagerError):
    code = "invalid_request"
    status = 400
    default_message = "the request is invalid"


class WrongKeyUsage(InvalidRequest):
    """The key's usage (or kind) does not allow the operation (AWS: ``InvalidKeyUsageException``)."""


class UnsupportedAlgorithm(InvalidRequest):
    """An algorithm the key's spec and usage do not allow (AWS: ``InvalidKeyUsageException``)."""


class WrongDigestLength(InvalidRequest):
    """A DIGEST message whose length is not the algorithm's digest length (AWS: ``ValidationException``)."""


class MessageTooLong(InvalidRequest):
    """A RAW message over 4,096 bytes, or a plaintext longer than the algorithm takes (AWS: ``ValidationException``)."""


class InvalidPeerKey(InvalidRequest):
    """A peer public key that is not a DER SubjectPublicKeyInfo of the key's curve (AWS: ``ValidationException``)."""


class UnsupportedByHsm(InvalidRequest):
    """The HSM lacks a mechanism (or a mechanism's parameter) a spec or algorithm needs: refused by name
    (AWS: ``UnsupportedOperationException``)."""


class MissingField(InvalidRequest):
    """A field the operation needs is absent, e.g. a GCM decryption's tag (KMIP: ``Missing Data``)."""


class DecryptionFailed(KeyManagerError):
    """Every cryptographic decryption failure; the message never varies."""

    code = "decryption_failed"
    status = 400
    default_message = "decryption failed"

    def __init__(self) -> None:
        super().__init__(None)


class UnknownKeyVersion(DecryptionFailed):
    """A ciphertext names a version the key, as read, does not have: answered exactly as DecryptionFailed,
    but a cached key may simply not know a version made since (see ``run_validated``)."""


class Unauthenticated(KeyManagerError):
    code = "unauthenticated"
    status = 401
    default_message = "missing or invalid credentials"


class Forbidden(KeyManagerError):
    code = "forbidden"
    status = 403
    default_message = "the principal may not do this"


class ApprovalPending(KeyManagerError):
    """A guarded call (``domain/approvals.py``) that was not run: it awaits approvals. Every door answers
    it in its own shape, naming ``request_id``; the same call sent again once approved runs."""

    code = "approval_pending"
    status = 202
    default_message = "the call awaits approval"

    def __init__(
        self, request_id: str = "", operations: tuple[str, ...] = (), approvals_required: int = 1, expires_at: str = ""
    ) -> None:
        super().__init__(
            f"approval pending: request {request_id} ({', '.join(operations)}) needs {approvals_required} "
            f"approval(s) by {expires_at}; send the same call again once it is approved"
        )
        self.request_id = request_id
        self.operations = operations
        self.approvals_required = approvals_required
        self.expires_at = expires_at


class NotFound(KeyManagerError):
    code = "not_found"
    status = 404
    default_message = "not found"


class KeyNotFound(NotFound):
    code = "key_not_found"
    default_message = "key not found"


class Conflict(KeyManagerError):
    code = "conflict"
    status = 409
    default_message = "conflict with the current state"


class PreconditionFailed(KeyManagerError):
    """An ``If-Match`` that names a version of the key other than the current one."""

    code = "precondition_failed"
    status = 412
    default_message = "the key was changed meanwhile: read it again and retry"


class KeyDisabled(KeyManagerError):
    code = "key_disabled"
    status = 409
    default_message = "the key is disabled"


class KeyPendingDeletion(KeyManagerError):
    code = "key_pending_deletion"
    status = 409
    default_message = "the key is pending deletion"


class KeyDestroyed(KeyManagerError):
    code = "key_destroyed"
    status = 409
    default_message = "the key is destroyed"


class KeyPendingImport(KeyManagerError):
    code = "key_pending_import"
    status = 409
    default_message = "the key has no key material yet: import it first"


class VersionBelowMinimum(KeyManagerError):
    code = "version_below_minimum"
    status = 409
    default_message = "the ciphertext's key version is below the key's min_decryption_version"


class PayloadTooLarge(KeyManagerError):
    code = "payload_too_large"
    status = 413
    default_message = "payload too large"


class RateLimited(KeyManagerError):
    code = "rate_limited"
    status = 429
    default_message = "too many requests"

    def __init__(self, message: str | None = None, *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds the client should wait (the ``Retry-After`` header)."""


class HsmUnavailable(KeyManagerError):
    code = "hsm_unavailable"
    status = 503
    default_message = "the HSM is unavailable"


class KeyMaterialMissing(HsmUnavailable):
    """A key version's object is not in the token: destroyed meanwhile, or a token that is not ours."""

    default_message = "a key object is missing from the HSM"


class DatabaseUnavailable(KeyManagerError):
    code = "database_unavailable"
    status = 503
    default_message = "the database is unavailable"


class SpoolBusy(KeyManagerError):
    """The process's spool quota is taken by other streams for now; the same stream may fit later."""

    code = "spool_busy"
    status = 503
    default_message = "the service is busy with other streams; retry later"
    retry_after = 5
