"""The AWS KMS API's vocabulary: errors by AWS name, key references (ids, ARNs, aliases), key metadata
(its request fields are read by :mod:`keymanager.domain.kms_fields`).

Pure: no HTTP, no storage. The API door (``doors/kms/door.py``) turns :class:`KmsError` into AWS's
answer ``{"__type": <code>, "message": …}``; :func:`aws_error` translates the service's own
errors so that both doors refuse the same things for the same reasons.

Aliases are names of keys: ``alias/<name>`` is the key that answers to ``<name>``, by its own
name or by a further alias (:class:`KeyAlias`; every name unique across keys), so the alias a
KMS client uses and the name the REST API uses are one thing. A key created through the KMS API
has no alias yet: its name is ``kms-<32 hex digits>`` (:func:`unaliased_name`), a form no alias
may take; its first alias becomes its name, the next ones are further aliases (at most
:data:`MAX_ALIASES_PER_KEY` in all, AWS's quota).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from keymanager import errors
from keymanager.domain import key_specs
from keymanager.domain.key_specs import SPECS, KeyUsage, spec_of
from keymanager.domain.models import Algorithm, Key, KeyState, Origin
from keymanager.domain.names import KMS_AUTO_NAME

MAX_BODY_BYTES = 64 * 1024
MAX_PLAINTEXT_BYTES = 4096
MAX_REF_CHARS = 2048
ALIAS_PREFIX = "alias/"
RESERVED_ALIAS_PREFIX = "alias/aws/"
MAX_ALIASES_PER_KEY = 50
_UNALIASED = KMS_AUTO_NAME
_ALIAS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,127}")
_KEY_ID = re.compile(r"[0-9a-f]{32}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ARN = re.compile(
    r"arn:(?P<partition>aws[a-z-]{0,16}):kms:(?P<region>[a-z0-9-]{1,64}):(?P<account>[0-9]{12}):(?P<resource>(key|alias)/.+)"
)
_PARTITIONS = {"cn-": "aws-cn", "us-gov-": "aws-us-gov", "us-iso-": "aws-iso", "us-isob-": "aws-iso-b"}
_PARTITIONS |= {"us-isof-": "aws-iso-f", "eu-isoe-": "aws-iso-e", "eusc-": "aws-eusc"}
"""The partition of the regions whose names begin so (botocore's ``endpoints.json``); ``aws`` for the others."""


class KmsError(errors.KeyManagerError):
    """A refusal of the KMS API: ``code`` is the AWS error name (``__type``)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


DENIED = frozenset(
    {
        "AccessDeniedException",
        "NotAuthorizedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "IncompleteSignatureException",
        "MissingAuthenticationTokenException",
    }
)
"""Refusals whose audit outcome is ``denied`` (AWS answers them 400 like any other)."""


def unsupported(what: str) -> KmsError:
    """UnsupportedOperationException naming ``what`` (and why, for what :data:`WHY_UNSUPPORTED` explains)."""
    why = WHY_UNSUPPORTED.get(what)
    return KmsError(
        "UnsupportedOperationException", f"{what} is not supported by this service" + (f": {why}" if why else "")
    )


_ONE_HSM = "a key is generated in this installation's HSM and its material never leaves it (docs/kms-api.md)"
WHY_UNSUPPORTED = {"MultiRegion": _ONE_HSM, "ReplicateKey": _ONE_HSM, "UpdatePrimaryRegion": _ONE_HSM}
"""The reasons given with refusals a client may not expect: multi-Region keys share material between regions."""


def aws_error(exc: errors.KeyManagerError) -> KmsError:
    """The AWS error a KMS client expects for one of the service's errors."""
    if isinstance(exc, KmsError):
        return exc
    for kind, code in _AWS_CODES:
        if isinstance(exc, kind):
            message = "Unable to decrypt the ciphertext" if code == "InvalidCiphertextException" else exc.message
            status = 503 if exc.status == 503 else 500 if exc.status >= 500 else 400
            return KmsError(code, message, status)
    return KmsError("KMSInternalException", "internal error", 500)


_AWS_CODES: tuple[tuple[type[errors.KeyManagerError], str], ...] = (
    (errors.ApprovalPending, "KMSInvalidStateException"),  # not run: its message names the approval request
    (errors.DecryptionFailed, "InvalidCiphertextException"),
    (errors.KeyNotFound, "NotFoundException"),
    (errors.NotFound, "NotFoundException"),
    (errors.Forbidden, "AccessDeniedException"),
    (errors.Unauthenticated, "UnrecognizedClientException"),
    (errors.KeyDisabled, "DisabledException"),
    (errors.KeyPendingDeletion, "KMSInvalidStateException"),
    (errors.KeyDestroyed, "KMSInvalidStateException"),
    (errors.KeyPendingImport, "KMSInvalidStateException"),
    (errors.VersionBelowMinimum, "KMSInvalidStateException"),
    (errors.Conflict, "KMSInvalidStateException"),
    (errors.PreconditionFailed, "KMSInvalidStateException"),
    (errors.PayloadTooLarge, "ValidationException"),
    (errors.WrongKeyUsage, "InvalidKeyUsageException"),
    (errors.UnsupportedAlgorithm, "InvalidKeyUsageException"),
    (errors.UnsupportedByHsm, "UnsupportedOperationException"),
    (errors.WrongDigestLength, "ValidationException"),
    (errors.MessageTooLong, "ValidationException"),
    (errors.InvalidPeerKey, "ValidationException"),
    (errors.InvalidRequest, "ValidationException"),
    (errors.RateLimited, "ThrottlingException"),
    (errors.KeyMaterialMissing, "KeyUnavailableException"),
    (errors.HsmUnavailable, "DependencyTimeoutException"),
    (errors.DatabaseUnavailable, "DependencyTimeoutException"),
    (errors.SpoolBusy, "LimitExceededException"),
)
"""AWS's error for each error class of ``keymanager/errors.py`` (the first row it is an instance of
wins, so a subclass comes before its base); ``tests/security/test_kms_error_classes.py`` walks every class."""


# -- key references ---------------------------------------------------------------------


def partition(region: str) -> str:
    """AWS's partition of ``region``: ``aws-cn`` for ``cn-*``, ``aws-us-gov`` for ``us-gov-*``, …"""
    return next((name for prefix, name in _PARTITIONS.items() if region.startswith(prefix)), "aws")


def key_arn(key_id: str, region: str, account: str) -> str:
    return f"arn:{partition(region)}:kms:{region}:{account}:key/{key_id}"


def alias_arn(name: str, region: str, account: str) -> str:
    return f"arn:{partition(region)}:kms:{region}:{account}:{ALIAS_PREFIX}{name}"


def resolve(key_id: str, account: str) -> str:
    """The native reference (key id or key name) a ``KeyId`` designates; NotFoundException otherwise.

    Accepted: the key id (32 hex digits, or the same as a dashed UUID), its key ARN,
    ``alias/<name>`` and the alias ARN (of this service's account, any region, in the region's partition).
    """
    ref = key_id
    match = _ARN.fullmatch(key_id)
    if match is not None:
        if match["account"] != account:
            raise KmsError("NotFoundException", "the key ARN names another account")
        if match["partition"] != partition(match["region"]):
            raise KmsError("NotFoundException", f"the region {match['region']} is not in {match['partition']}")
        resource = match["resource"]
        ref = resource.removeprefix("key/") if resource.startswith("key/") else resource
    if ref.startswith(ALIAS_PREFIX):
        return alias_name(ref)
    if _UUID.fullmatch(ref):
        ref = ref.replace("-", "")
    if _KEY_ID.fullmatch(ref):
        return ref
    raise KmsError("NotFoundException", "Invalid keyId: not a key id, key ARN, alias name or alias ARN")


def names_alias(key_id: str) -> bool:
    """Whether a ``KeyId`` is an alias (``alias/<name>`` or an alias ARN) rather than a key."""
    return key_id.startswith(ALIAS_PREFIX) or (key_id.startswith("arn:") and f":{ALIAS_PREFIX}" in key_id)


def alias_name(alias: str) -> str:
    """The key name ``alias/<name>`` designates; ValidationException for a malformed or reserved one."""
    if alias.startswith(RESERVED_ALIAS_PREFIX):
        raise KmsError("NotAuthorizedException", "alias/aws/ names are reserved for AWS managed keys")
    name = alias.removeprefix(ALIAS_PREFIX)
    if not alias.startswith(ALIAS_PREFIX) or not _ALIAS_NAME.fullmatch(name) or _UNALIASED.fullmatch(name):
        raise KmsError(
            "ValidationException",
            "an alias is 'alias/' then 1-128 letters, digits, '_', '.' or '-' starting with a letter",
        )
    return name


def unaliased_name() -> str:
    """A new name for a key without an alias."""
    return "kms-" + secrets.token_hex(16)


def alias_of(key: Key) -> str | None:
    """The alias that is ``key``'s name, or None for a key whose name is no alias."""
    return None if is_unaliased(key.name) else ALIAS_PREFIX + key.name


def is_unaliased(name: str) -> bool:
    """Whether ``name`` is the name of a key without an alias (``kms-<32 hex digits>``)."""
    return _UNALIASED.fullmatch(name) is not None


@dataclass(frozen=True)
class KeyAlias:
    """A name key ``key_id`` answers to: its own name, or a further alias (ListAliases shows those
    that are not :func:`is_unaliased`)."""

    name: str
    key_id: str
    created_at: datetime
    updated_at: datetime


# -- key metadata -------------------------------------------------------------------------

SYMMETRIC_DEFAULT = "SYMMETRIC_DEFAULT"
MAC_ALGORITHMS = {
    algorithm: spec.algorithms(KeyUsage.GENERATE_VERIFY_MAC)[0]
    for algorithm, spec in SPECS.items()
    if spec.allowed(KeyUsage.GENERATE_VERIFY_MAC)
}
"""AWS's ``MacAlgorithm`` of each HMAC key (one per key spec, as in AWS; from the table of key types)."""
AWS_ONLY = frozenset(
    {"SM2", "SM2DSA", "SM2PKE", "ML_DSA_44", "ML_DSA_65", "ML_DSA_87", "ML_DSA_SHAKE_256", "EXTERNAL_MU"}
    | {"ML_KEM_512", "ML_KEM_768", "ML_KEM_1024", "ENCAPSULATE_DECAPSULATE"}
)
"""Names of AWS's model (key specs, algorithms, message types, usages) no row of the table has:
``UnsupportedOperationException`` naming them, where an unknown name is a ``ValidationException``."""
_ALGORITHM_FIELDS = {
    KeyUsage.ENCRYPT_DECRYPT: "EncryptionAlgorithms",
    KeyUsage.SIGN_VERIFY: "SigningAlgorithms",
    KeyUsage.KEY_AGREEMENT: "KeyAgreementAlgorithms",
    KeyUsage.GENERATE_VERIFY_MAC: "MacAlgorithms",
}
"""The ``KeyMetadata`` field that lists a key's algorithms, per usage."""
_STATES = {
    KeyState.ENABLED: "Enabled",
    KeyState.DISABLED: "Disabled",
    KeyState.PENDING_DELETION: "PendingDeletion",
    KeyState.DESTROYED: "Unavailable",
    KeyState.PENDING_IMPORT: "PendingImport",
}
"""AWS's ``KeyState`` of each key state."""
_ORIGINS = {Origin.HSM: "AWS_KMS", Origin.EXTERNAL: "EXTERNAL"}
"""AWS's ``Origin`` of each key origin: made in the HSM, or imported material."""


def creatable(kms_spec: str) -> Algorithm | None:
    """The native spec whose AWS ``KeySpec`` is ``kms_spec`` (None when no row of the table has it).
    ``SYMMETRIC_DEFAULT``'s is the preferred one: the service makes it AES_256_CBC_HMAC_SHA256 on an
    HSM without AES-GCM, or what ``KM_KMS_DEFAULT_ALGORITHM`` says (``services/container.py``)."""
    row = key_specs.by_kms_spec(kms_spec)
    return None if row is None else row.algorithm


def key_spec(key: Key) -> str:
    """AWS's ``KeySpec``: the row's KMS name; ``SYMMETRIC_DEFAULT`` for the symmetric specs without one."""
    return spec_of(key.algorithm).kms_spec or SYMMETRIC_DEFAULT


def key_usage(key: Key) -> str:
    """AWS's ``KeyUsage`` of ``key`` (an FF1 key, which only makes tokens, shows as ``ENCRYPT_DECRYPT``)."""
    return KeyUsage.ENCRYPT_DECRYPT.value if key.key_usage is KeyUsage.TOKENIZE else key.key_usage.value


def key_family(key: Key) -> str:
    """The type of ``key`` UpdateAlias keeps an alias within: ``symmetric``, ``asymmetric`` or ``HMAC``."""
    if spec_of(key.algorithm).asymmetric:
        return "asymmetric"
    return "HMAC" if key.key_usage is KeyUsage.GENERATE_VERIFY_MAC else "symmetric"


def algorithms(key: Key) -> dict[str, list[str]]:
    """The ``KeyMetadata`` (and ``GetPublicKey``) field naming the algorithms ``key`` takes, by usage."""
    usage = key.key_usage
    if usage is KeyUsage.TOKENIZE:
        return {"EncryptionAlgorithms": [SYMMETRIC_DEFAULT]}
    return {_ALGORITHM_FIELDS[usage]: list(spec_of(key.algorithm).algorithms(usage))}


def metadata(key: Key, region: str, account: str) -> dict[str, Any]:
    """``KeyMetadata`` of ``key`` as DescribeKey and CreateKey answer it."""
    out: dict[str, Any] = {
        "AWSAccountId": account,
        "KeyId": key.id,
        "Arn": key_arn(key.id, region, account),
        "CreationDate": epoch(key.created_at),
        "Enabled": key.state is KeyState.ENABLED,
        "Description": key.description,
        "KeyUsage": key_usage(key),
        "KeyState": _STATES[key.state],
        "Origin": _ORIGINS[key.origin],
        "KeyManager": "CUSTOMER",
        "CustomerMasterKeySpec": key_spec(key),
        "KeySpec": key_spec(key),
        "MultiRegion": False,
        **algorithms(key),
    }
    if key.deletion_date is not None:
        out["DeletionDate"] = epoch(key.deletion_date)
    return out


def epoch(moment: datetime) -> float:
    """A timestamp as JSON 1.1 carries it: seconds since the epoch."""
    return round(moment.timestamp(), 3)
