"""The KMIP door's own vocabulary: one enum per protocol concept, valued by the specification's
numbers (:mod:`.protocol`, :mod:`.crypto`). The operations name these; only the codec
(``doors/kmip/codec/``) knows a protocol library's."""

from keymanager.doors.kmip.spec.crypto import (
    AttributeType,
    BlockCipherMode,
    CryptographicAlgorithm,
    DigitalSignatureAlgorithm,
    HashingAlgorithm,
    PaddingMethod,
)
from keymanager.doors.kmip.spec.protocol import (
    CertificateType,
    CryptographicUsageMask,
    KeyFormatType,
    ObjectType,
    OpaqueDataType,
    Operation,
    QueryFunction,
    ResultReason,
    RevocationReasonCode,
    SecretDataType,
    State,
    ValidityIndicator,
)

__all__ = [
    "AttributeType",
    "BlockCipherMode",
    "CertificateType",
    "CryptographicAlgorithm",
    "CryptographicUsageMask",
    "DigitalSignatureAlgorithm",
    "HashingAlgorithm",
    "KeyFormatType",
    "ObjectType",
    "OpaqueDataType",
    "Operation",
    "PaddingMethod",
    "QueryFunction",
    "ResultReason",
    "RevocationReasonCode",
    "SecretDataType",
    "State",
    "ValidityIndicator",
]

VERSIONS: tuple[tuple[int, int], ...] = ((2, 0), (1, 4), (1, 3), (1, 2), (1, 1), (1, 0))
"""The protocol versions served, the most preferred first (DiscoverVersions answers them in this order)."""
