"""The AWS External Key Store (XKS) proxy API, version 1: its paths, fields, errors and formats.

AWS KMS calls ``POST https://<server>/<prefix>/kms/xks/v1/keys/<externalKeyId>/{metadata,encrypt,decrypt}``
and ``…/v1/health`` (specification: ``aws/aws-kms-xksproxy-api-spec``, ``xks_proxy_api_spec.md``).
This module is pure: it parses what AWS sends and spells what it expects back; the services do
the rest (``doors/xks/``).

Ciphertext. Encrypt answers AES-256-GCM made in the HSM under the key's primary version, with a
12-byte IV, a 16-byte tag and a ``ciphertextMetadata`` naming the key version
(``km:xks1:<version>``, at most 17 bytes, within the spec's 20). The AAD the HSM authenticates is
the spec's (its Encrypt section):
``uint16_be(len(aad)) ‖ aad ‖ uint8(len(metadata)) ‖ metadata``, so a changed AAD, metadata, IV,
ciphertext or tag all fail the tag alike, and a rotated key still opens what its older versions
made. Every failure of a decryption is the same :class:`XksError` ``InvalidCiphertextException``.
"""

from __future__ import annotations

import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from keymanager import errors

API_PATH = "kms/xks/v1"
PREFIX_RULE = "xks_uri_prefix is 1-116 characters of a-z, A-Z, 0-9, '_', '-' and '/' (not first, last or doubled)"
MAX_URI_PATH = 128
"""AWS's limit on ``XksProxyUriPath`` (``/<prefix>/kms/xks/v1``): so a prefix has at most 116 characters."""
REGION_RULE = "xks_region is an AWS region such as eu-west-1"
_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+){1,2}-[0-9]{1,2}")
_PREFIX = re.compile(r"[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*")
_KEY_ID = r"[A-Za-z0-9._-]{1,128}"
_PATH = re.compile(rf"/(?P<prefix>.+)/kms/xks/v1/(?:keys/(?P<key>{_KEY_ID})/(?P<op>metadata|encrypt|decrypt)|health)")
OPERATIONS = {"metadata": "GetKeyMetadata", "encrypt": "Encrypt", "decrypt": "Decrypt", None: "GetHealthStatus"}
"""The operation each path ends in (``None``: the health path)."""

MAX_BODY_BYTES = 64 * 1024
MAX_PLAINTEXT_BYTES = 4300
"""The spec's minimum, served; more is refused (ValidationException): AWS KMS never sends more."""
MAX_AAD_BYTES = 8192
MAX_METADATA_BYTES = 20
MAX_ARN = 2048
IV_BYTES = 12
TAG_BYTES = 16
ALGORITHM = "AES_GCM"
INTEGRITY_ALGORITHM = "SHA_256"
_METADATA = re.compile(rb"km:xks1:([1-9][0-9]{0,8})")
_STATUS = {
    "ValidationException": 400,
    "InvalidStateException": 400,
    "InvalidCiphertextException": 400,
    "InvalidKeyUsageException": 400,
    "AuthenticationFailedException": 401,
    "AccessDeniedException": 403,
    "KeyNotFoundException": 404,
    "InvalidUriPathException": 404,
    "MethodNotAllowed": 405,
    "ThrottlingException": 429,
    "InternalException": 500,
    "UnsupportedOperationException": 501,
    "DependencyTimeoutException": 503,
}
_CIPHERTEXT_MESSAGE = (
    "The request was rejected because the specified ciphertext, initialization vector, additional "
    "authenticated data or authentication tag is corrupted, missing, or otherwise invalid."
)


class XksError(errors.KeyManagerError):
    """A refusal of the XKS API: ``name`` is the spec's ``errorName``, ``status`` its HTTP status.

    ``message`` (the ``errorMessage``) is printable ASCII under 512 characters, as the spec requires."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__("".join(c if " " <= c <= "~" else "?" for c in message[:511]))
        self.name = name
        self.code = name
        self.status = _STATUS[name]


def invalid_ciphertext() -> XksError:
    """The one answer of every decryption failure."""
    return XksError("InvalidCiphertextException", _CIPHERTEXT_MESSAGE)


def invalid(message: str) -> XksError:
    return XksError("ValidationException", message)


class KeyUnseen(errors.Forbidden):
    """The key's policy does not name the key store: to it, the key does not exist (KeyNotFoundException).

    A Forbidden, so that a policy changed behind the cache is read afresh (``run_validated``)."""

    default_message = "the external key is not found"


_ERRORS: tuple[tuple[type[errors.KeyManagerError], str], ...] = (
    (KeyUnseen, "KeyNotFoundException"),
    (errors.DecryptionFailed, "InvalidCiphertextException"),
    (errors.VersionBelowMinimum, "InvalidCiphertextException"),
    (errors.KeyNotFound, "KeyNotFoundException"),
    (errors.Forbidden, "InvalidKeyUsageException"),
    (errors.KeyDisabled, "InvalidStateException"),
    (errors.KeyPendingDeletion, "InvalidStateException"),
    (errors.KeyDestroyed, "InvalidStateException"),
    (errors.KeyPendingImport, "InvalidStateException"),
    (errors.PayloadTooLarge, "ValidationException"),
    (errors.InvalidRequest, "ValidationException"),
    (errors.RateLimited, "ThrottlingException"),
    (errors.HsmUnavailable, "DependencyTimeoutException"),
    (errors.DatabaseUnavailable, "DependencyTimeoutException"),
)


def xks_error(exc: errors.KeyManagerError) -> XksError:
    """The XKS error of one of the service's errors on a key the key store may see (a refusal of the
    policy is then the key's usage: InvalidKeyUsageException); InternalException for anything else."""
    if isinstance(exc, XksError):
        return exc
    for kind, name in _ERRORS:
        if isinstance(exc, kind):
            return invalid_ciphertext() if name == "InvalidCiphertextException" else XksError(name, exc.message)
    return XksError("InternalException", "internal error")


# -- paths and key stores -----------------------------------------------------------------
@dataclass(frozen=True)
class XksPath:
    """What a request's path names: the key store's prefix, the operation, the external key (if any)."""

    prefix: str
    operation: str
    key_id: str | None


def parse_path(path: str) -> XksPath:
    """The parts of an XKS path; InvalidUriPathException for any other path."""
    match = _PATH.fullmatch(path)
    if match is None or not is_prefix(match["prefix"]):
        raise XksError("InvalidUriPathException", "the URI path is not one of the XKS proxy API")
    return XksPath(match["prefix"], OPERATIONS[match["op"]], match["key"])


def is_prefix(prefix: str) -> bool:
    """Whether ``prefix`` may be a key store's ``xks_uri_prefix`` (:data:`PREFIX_RULE`; never containing
    the API's own path, so that a path names one prefix)."""
    return (
        len(uri_path(prefix)) <= MAX_URI_PATH
        and _PREFIX.fullmatch(prefix) is not None
        and f"/{API_PATH}/" not in f"/{prefix}/"
    )


def is_region(region: str) -> bool:
    """Whether ``region`` has the form of an AWS region (``eu-west-1``, ``us-gov-east-1``)."""
    return _REGION.fullmatch(region) is not None


def uri_path(prefix: str) -> str:
    """The ``XksProxyUriPath`` AWS KMS is configured with for key store ``prefix``."""
    return f"/{prefix}/{API_PATH}"


# -- ciphertext -----------------------------------------------------------------------------
def metadata_of(version: int) -> bytes:
    """The ``ciphertextMetadata`` of a ciphertext made by key version ``version``."""
    return b"km:xks1:%d" % version


def version_of(metadata: bytes) -> int:
    """The key version a ``ciphertextMetadata`` names; InvalidCiphertextException if it is not one of ours."""
    match = _METADATA.fullmatch(metadata)
    if match is None:
        raise invalid_ciphertext()
    return int(match[1])


def gcm_aad(aad: bytes, metadata: bytes) -> bytes:
    """The AAD of the HSM's AES-GCM: ``uint16_be(len(aad)) ‖ aad ‖ uint8(len(metadata)) ‖ metadata``."""
    return len(aad).to_bytes(2, "big") + aad + len(metadata).to_bytes(1, "big") + metadata


def integrity_value(aad: bytes, metadata: bytes, iv: bytes, ciphertext: bytes, tag: bytes) -> bytes:
    """The ``ciphertextDataIntegrityValue``: SHA-256 of ``aad ‖ metadata ‖ iv ‖ ciphertext ‖ tag`` (Appendix C)."""
    return hashlib.sha256(aad + metadata + iv + ciphertext + tag).digest()


# -- request fields -------------------------------------------------------------------------
def blob(params: Mapping[str, Any], name: str, *, high: int, required: bool = True) -> bytes | None:
    """Field ``name``, standard base64 (ValidationException otherwise) of 1 to ``high`` bytes (more:
    UnsupportedOperationException, the spec's answer to a size beyond what a proxy supports)."""
    value = params.get(name)
    if value is None:
        if required:
            raise invalid(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise invalid(f"{name} must be a base64 string")
    if len(value) > 4 * (high // 3 + 1):
        raise XksError("UnsupportedOperationException", f"{name} is limited to {high} bytes")
    decoded = decode(value)
    if not decoded:
        raise invalid(f"{name} must be standard base64 of at least one byte")
    if len(decoded) > high:
        raise XksError("UnsupportedOperationException", f"{name} is limited to {high} bytes")
    return decoded


def ciphertext_fields(params: Mapping[str, Any]) -> tuple[bytes, bytes, bytes, bytes, int]:
    """A Decrypt's AAD, ciphertext, IV, tag and the key version its ``ciphertextMetadata`` names;
    InvalidCiphertextException for any of them missing, not base64 or of a length ours never have."""
    try:
        aad = blob(params, "additionalAuthenticatedData", high=MAX_AAD_BYTES, required=False) or b""
        sealed = blob(params, "ciphertext", high=MAX_PLAINTEXT_BYTES)
        iv = blob(params, "initializationVector", high=IV_BYTES)
        tag = blob(params, "authenticationTag", high=TAG_BYTES)
        metadata = blob(params, "ciphertextMetadata", high=MAX_METADATA_BYTES)
    except XksError:
        raise invalid_ciphertext() from None
    assert sealed is not None and iv is not None and tag is not None and metadata is not None
    if len(iv) != IV_BYTES or len(tag) != TAG_BYTES:
        raise invalid_ciphertext()
    return aad, sealed, iv, tag, version_of(metadata)


def decode(value: str) -> bytes | None:
    """Standard base64 (RFC 4648 section 4, padded) decoded; None when it is not."""
    if len(value) % 4:
        return None
    try:
        return binascii.a2b_base64(value, strict_mode=True)
    except ValueError:  # binascii.Error, or text that is not ASCII
        return None


def encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode()


def require_algorithm(params: Mapping[str, Any]) -> None:
    """ValidationException unless ``encryptionAlgorithm`` is ``AES_GCM``."""
    if params.get("encryptionAlgorithm") != ALGORITHM:
        raise invalid(f"encryptionAlgorithm must be {ALGORITHM}")


def wants_integrity_value(params: Mapping[str, Any]) -> bool:
    """Whether an Encrypt asks for a ``ciphertextDataIntegrityValue`` (ValidationException for another algorithm)."""
    algorithm = params.get("ciphertextDataIntegrityValueAlgorithm")
    if algorithm is None:
        return False
    if algorithm != INTEGRITY_ALGORITHM:
        raise invalid(f"ciphertextDataIntegrityValueAlgorithm must be {INTEGRITY_ALGORITHM}")
    return True


_REQUIRED = {
    "GetKeyMetadata": ("awsPrincipalArn", "kmsOperation", "kmsRequestId"),
    "Encrypt": ("awsPrincipalArn", "kmsKeyArn", "kmsOperation", "kmsRequestId"),
    "Decrypt": ("awsPrincipalArn", "kmsKeyArn", "kmsOperation", "kmsRequestId"),
    "GetHealthStatus": ("kmsOperation", "kmsRequestId"),
}
"""The ``requestMetadata`` fields each operation requires (the spec's REQUIRED ones; ``kmsKeyArn`` is
optional for GetKeyMetadata, which CreateKey calls before the KMS key has an ARN)."""
AUDITED_METADATA = (
    "kmsRequestId",
    "kmsOperation",
    "awsPrincipalArn",
    "kmsViaService",
    "kmsKeyArn",
    "awsSourceVpc",
    "awsSourceVpce",
)
"""The ``requestMetadata`` fields an audit record keeps, most useful first (the record's bounds cut the rest)."""


def request_metadata(params: Mapping[str, Any], operation: str) -> dict[str, str]:
    """The known string fields of ``requestMetadata`` (each at most :data:`MAX_ARN` characters).

    ValidationException for a missing object, a field the operation requires (:data:`_REQUIRED`;
    any value of ``kmsOperation`` and ``kmsRequestId`` is accepted, as the spec requires) or a known
    field that is not such a string; fields the spec may add later are ignored. The health check
    too: its error table omits ValidationException, but its request names two REQUIRED fields,
    and AWS's test client (``aws-samples/aws-kms-xksproxy-test-client``) expects the refusal."""
    metadata = params.get("requestMetadata")
    if not isinstance(metadata, dict):
        raise invalid("requestMetadata is required")
    kept: dict[str, str] = {}
    for name in AUDITED_METADATA:
        value = metadata.get(name)
        if isinstance(value, str) and 0 < len(value) <= MAX_ARN:
            kept[name] = value
        elif value is not None:
            raise invalid(f"requestMetadata.{name} must be a string of 1-{MAX_ARN} characters")
    missing = [name for name in _REQUIRED[operation] if name not in kept]
    if missing:
        raise invalid(f"requestMetadata.{missing[0]} is required")
    return kept
