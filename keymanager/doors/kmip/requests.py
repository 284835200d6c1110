"""What each KMIP operation reads and answers, in the door's own types: one request and one answer
per operation served, named by ``doors/kmip/spec/`` (the codec, ``doors/kmip/codec/``, reads
them from the wire and writes them back; the operations never see a protocol library's classes).

A value the codec could not read into these types is kept as the reason it could not: an
:class:`Attribute` with its ``error``, a :class:`Secret` not ``readable``. The operation that reads
it refuses it where it reads it, as it would refuse a value it reads itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from keymanager.doors.kmip import spec


@dataclass(frozen=True)
class Attribute:
    """One attribute: its name, its index (of a multi-valued one), its value as the JSON keeps it
    (``doors/kmip/attributes.py``)."""

    name: str
    index: int | None = None
    value: Any = None
    error: Exception | None = field(default=None, compare=False)
    """Why the value could not be read (raised by :func:`~.attributes.parsed`)."""
    source: object = field(default=None, compare=False, repr=False)
    """The codec's own reading of it, to write back as it came (AddAttribute's answer)."""


@dataclass(frozen=True)
class Template:
    """A Template-Attribute: the attributes a client gives, and whether it names templates."""

    attributes: Sequence[Attribute] = ()
    named: bool = False


@dataclass(frozen=True)
class Secret:
    """The value of an object a client registers (a key's material, secret data, a certificate, …)."""

    readable: bool
    value: bytes = b""
    cryptographic_algorithm: int | None = None
    """A key's Cryptographic Algorithm (the number: a client may name one the vocabulary lacks)."""
    cryptographic_length: int | None = None
    value_type: int | None = None
    """Secret Data Type, Opaque Data Type or Certificate Type."""


@dataclass
class Parameters:
    """Cryptographic Parameters (the ones the operations read)."""

    block_cipher_mode: spec.BlockCipherMode | None = None
    padding_method: spec.PaddingMethod | None = None
    hashing_algorithm: spec.HashingAlgorithm | None = None
    digital_signature_algorithm: spec.DigitalSignatureAlgorithm | None = None
    cryptographic_algorithm: spec.CryptographicAlgorithm | None = None
    random_iv: bool | None = None
    iv_length: int | None = None
    tag_length: int | None = None


# -- requests -----------------------------------------------------------------------------------


@dataclass
class Named:
    """A request that names one object only (Activate, Destroy, GetAttributeList), or none at all."""

    unique_identifier: str | None = None


@dataclass
class RevokeRequest:
    unique_identifier: str | None = None
    revocation_code: spec.RevocationReasonCode | None = None
    compromise_occurrence_date: int | None = None


@dataclass
class CreateRequest:
    object_type: spec.ObjectType | None = None
    template: Template | None = None


@dataclass
class CreateKeyPairRequest:
    common: Template | None = None
    private: Template | None = None
    public: Template | None = None


@dataclass
class RegisterRequest:
    object_type: spec.ObjectType | None = None
    template: Template | None = None
    managed_object: Secret | None = None


@dataclass
class GetRequest:
    unique_identifier: str | None = None
    key_format_type: spec.KeyFormatType | None = None
    wrapping: bool = False
    """Whether it asks for the key wrapped (a Key Wrapping Specification)."""


@dataclass
class CipherRequest:
    """An Encrypt, Decrypt or MACVerify request (the hot path reads these too)."""

    unique_identifier: str | None = None
    cryptographic_parameters: Parameters | None = None
    data: bytes | None = None
    iv_counter_nonce: bytes | None = None
    auth_additional_data: bytes | None = None
    auth_tag: bytes | None = None
    mac_data: bytes | None = None
    """MACVerify's MAC."""


@dataclass
class SignatureRequest:
    """A MAC, Sign or SignatureVerify request."""

    unique_identifier: str | None = None
    cryptographic_parameters: Parameters | None = None
    data: bytes | None = None
    signature_data: bytes | None = None


@dataclass
class LocateRequest:
    attributes: Sequence[Attribute] = ()
    offset_items: int | None = None
    maximum_items: int | None = None


@dataclass
class AttributesRequest:
    """GetAttributes: the attributes named (none: every one)."""

    unique_identifier: str | None = None
    attribute_names: Sequence[str] = ()


@dataclass
class AttributeChange:
    """AddAttribute, ModifyAttribute, SetAttribute, DeleteAttribute: KMIP 1.x names the ``attribute``
    (or, to delete, its ``attribute_name`` and ``attribute_index``); 2.0 a ``new_attribute``, a
    ``current_attribute`` or, to delete every value, a ``reference`` (an attribute's name). An
    attribute that came without its value carries its Missing Data refusal (raised where it is read,
    a new one per request)."""

    unique_identifier: str | None = None
    attribute: Attribute | None = None
    attribute_name: str | None = None
    attribute_index: int | None = None
    new_attribute: Attribute | None = None
    current_attribute: Attribute | None = None
    reference: str | None = None


@dataclass
class VersionsRequest:
    protocol_versions: Sequence[tuple[int, int]] = ()


@dataclass
class QueryRequest:
    query_functions: Sequence[spec.QueryFunction] = ()


# -- answers ------------------------------------------------------------------------------------


@dataclass
class Identified:
    """The answer naming the object only (Register, Activate, Revoke, Destroy, SetAttribute, and 2.0's
    ModifyAttribute and DeleteAttribute)."""

    unique_identifier: str


@dataclass
class Created:
    object_type: spec.ObjectType
    unique_identifier: str


@dataclass
class PairCreated:
    private_key_unique_identifier: str
    public_key_unique_identifier: str


@dataclass
class Got:
    """Get's answer: the object's value, and what its type needs to be written."""

    object_type: spec.ObjectType
    unique_identifier: str
    value: bytes
    cryptographic_algorithm: spec.CryptographicAlgorithm | None = None
    cryptographic_length: int | None = None
    key_format_type: spec.KeyFormatType | None = None
    value_type: int | None = None
    """Secret Data Type or Opaque Data Type."""


@dataclass
class EncryptResponse:
    unique_identifier: str
    data: bytes
    iv_counter_nonce: bytes | None = None
    auth_tag: bytes | None = None


@dataclass
class DecryptResponse:
    unique_identifier: str
    data: bytes


@dataclass
class MacResponse:
    unique_identifier: str
    mac_data: bytes


@dataclass
class MacVerified:
    unique_identifier: str
    valid: bool


@dataclass
class Signed:
    unique_identifier: str
    signature_data: bytes


@dataclass
class SignatureVerified:
    unique_identifier: str
    valid: bool


@dataclass
class Located:
    located_items: int
    unique_identifiers: Sequence[str]


@dataclass
class AttributesAnswer:
    """GetAttributes' answer; AddAttribute's and 1.x's ModifyAttribute and DeleteAttribute (one attribute)."""

    unique_identifier: str
    attributes: Sequence[Attribute] = ()


@dataclass
class AttributeNames:
    unique_identifier: str
    attribute_names: Sequence[str]


@dataclass
class Versions:
    protocol_versions: Sequence[tuple[int, int]]


@dataclass
class QueryAnswer:
    operations: Sequence[spec.Operation] | None = None
    object_types: Sequence[spec.ObjectType] | None = None
    vendor_identification: str | None = None
    server_information: bool = False
    """Whether to answer a Server Information (empty)."""
