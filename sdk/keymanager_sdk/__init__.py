"""Python SDK of keymanager, a key manager backed by a PKCS#11 HSM.

``KeyManager`` (sync) and ``AsyncKeyManager`` (asyncio) call the REST API; typed results are
frozen dataclasses (asymmetric keys: ``Signature``, ``PublicKey`` loadable by ``cryptography``,
``SharedSecret``, ``DataKeyPair``; see ``keymanager_sdk._asymmetric``); every error is a
``KeyManagerError`` (see ``keymanager_sdk._exceptions`` for the hierarchy). Dual control: a
guarded call held for approval raises ``ApprovalPending``; approval requests (``Approval``) and
rules (``ApprovalRule``): see ``keymanager_sdk._approvals``. Managed objects that are not keys
(``ManagedObject``: secret data, opaque objects, certificates registered over KMIP): see
``keymanager_sdk._objects``. Large blobs are envelope-encrypted locally (``encrypt_stream`` /
``encrypt_file``) in the KMEV format described in ``docs/envelope-format.md``.
"""

from keymanager_sdk._access_keys import AccessKey, AppRole, NewAccessKey, NewAppRole
from keymanager_sdk._approvals import Approval, ApprovalDenial, ApprovalRule, ApprovalVote
from keymanager_sdk._asymmetric import DataKeyPair, PeerKey, PublicKey, SharedSecret, Signature
from keymanager_sdk._async_client import AsyncKeyManager
from keymanager_sdk._client import KeyManager
from keymanager_sdk._core import RetryPolicy
from keymanager_sdk._core import __version__ as __version__
from keymanager_sdk._envelope import DataKeyProvider, EnvelopeHeader, decrypt_envelope, encrypt_envelope
from keymanager_sdk._exceptions import (
    APIError,
    ApprovalPending,
    ConfigurationError,
    Conflict,
    DatabaseUnavailable,
    DecryptionFailed,
    EnvelopeError,
    Forbidden,
    HsmUnavailable,
    InvalidRequest,
    KeyDestroyed,
    KeyDisabled,
    KeyManagerError,
    KeyNotFound,
    KeyPendingDeletion,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    RateLimited,
    TransportError,
    Unauthenticated,
    VersionBelowMinimum,
)
from keymanager_sdk._key_import import ImportParameters, wrap_key_material
from keymanager_sdk._key_specs import KeySpec
from keymanager_sdk._models import (
    AuditRecord,
    AuditVerification,
    DataKey,
    Encrypted,
    Health,
    Key,
    KeyVersion,
    Mac,
    NewPrincipal,
    Policy,
    Principal,
    Readiness,
)
from keymanager_sdk._objects import ManagedObject
from keymanager_sdk._tokens import Token

__all__ = [
    "APIError",
    "AccessKey",
    "AppRole",
    "Approval",
    "ApprovalDenial",
    "ApprovalPending",
    "ApprovalRule",
    "ApprovalVote",
    "AsyncKeyManager",
    "AuditRecord",
    "AuditVerification",
    "ConfigurationError",
    "Conflict",
    "DataKey",
    "DataKeyPair",
    "DataKeyProvider",
    "DatabaseUnavailable",
    "DecryptionFailed",
    "Encrypted",
    "EnvelopeError",
    "EnvelopeHeader",
    "Forbidden",
    "Health",
    "HsmUnavailable",
    "ImportParameters",
    "InvalidRequest",
    "Key",
    "KeyDestroyed",
    "KeyDisabled",
    "KeyManager",
    "KeyManagerError",
    "KeyNotFound",
    "KeyPendingDeletion",
    "KeySpec",
    "KeyVersion",
    "Mac",
    "ManagedObject",
    "NewAccessKey",
    "NewAppRole",
    "NewPrincipal",
    "NotFound",
    "PayloadTooLarge",
    "PeerKey",
    "Policy",
    "PreconditionFailed",
    "Principal",
    "PublicKey",
    "RateLimited",
    "Readiness",
    "RetryPolicy",
    "SharedSecret",
    "Signature",
    "Token",
    "TransportError",
    "Unauthenticated",
    "VersionBelowMinimum",
    "__version__",
    "decrypt_envelope",
    "encrypt_envelope",
    "wrap_key_material",
]
