"""PyKMIP's attributes as the door's (:class:`~keymanager.doors.kmip.requests.Attribute`: a name,
an index, the value as ``doors/kmip/attributes.py``'s JSON keeps it) and back.

Reading never raises: a value that cannot be read keeps why in the attribute's ``error``, which the
operation raises where it reads the value (as it did when it read PyKMIP's attribute itself).
"""

from __future__ import annotations

from typing import Any

from kmip.core import attributes as kmip_attributes
from kmip.core import enums, primitives
from kmip.core import objects as core_objects
from kmip.core.factories.attributes import AttributeFactory

from keymanager.doors.kmip import spec
from keymanager.doors.kmip.attributes import is_custom
from keymanager.doors.kmip.refusals import KmipRefusal, Reason, invalid
from keymanager.doors.kmip.requests import Attribute, Parameters

A = enums.AttributeType
_CUSTOM_TYPES: dict[type, str] = {
    primitives.TextString: "text",
    primitives.Integer: "integer",
    primitives.LongInteger: "long",
    primitives.Boolean: "boolean",
    primitives.ByteString: "bytes",
    primitives.DateTime: "date",
    primitives.Enumeration: "enumeration",
    primitives.Interval: "interval",
}
_FACTORY = AttributeFactory()


def read(attribute: core_objects.Attribute) -> Attribute:
    """The door's attribute of a PyKMIP ``Attribute`` (KMIP 1.x: name, index, value)."""
    name = str(attribute.attribute_name.value)
    index = None if attribute.attribute_index is None else int(attribute.attribute_index.value)
    try:
        return Attribute(name, index, json_value(name, attribute.attribute_value), source=attribute)
    except Exception as exc:  # the operation raises it where it reads the value
        return Attribute(name, index, error=exc, source=attribute)


def read_tagged(holder: Any) -> Attribute | None:
    """KMIP 2.0's New or Current Attribute (an attribute named by its tag): None when absent; an
    attribute whose error is Missing Data when it holds none."""
    if holder is None:
        return None
    if getattr(holder, "attribute", None) is None:
        return Attribute("", error=KmipRefusal(Reason.MISSING_DATA, "the request names no attribute"))
    value = holder.attribute
    try:
        name = enums.convert_attribute_tag_to_name(value.tag)
    except Exception as exc:
        return Attribute("", error=exc)
    try:
        return Attribute(name, None, json_value(name, value))
    except Exception as exc:
        return Attribute(name, None, error=exc)


def json_value(name: str, value: Any) -> Any:
    """A PyKMIP attribute value as the JSON keeps it (the bounds of text are the operations')."""
    if value is None:
        return None
    if name == A.NAME.value:
        return str(value.name_value.value)
    if name == A.APPLICATION_SPECIFIC_INFORMATION.value:
        return [str(value.application_namespace), str(value.application_data)]
    if is_custom(name):
        kind = next((name for cls, name in _CUSTOM_TYPES.items() if isinstance(value, cls)), None)
        if kind is None:
            raise invalid(f"the custom attribute {name[:64]} has a type this server does not keep")
        raw = value.value
        if kind == "bytes":
            return [kind, bytes(raw).hex()]
        if kind == "enumeration":
            raw = getattr(raw, "value", raw)
        return [kind, raw]
    if name == A.CRYPTOGRAPHIC_PARAMETERS.value:
        return parameters(value)
    raw = getattr(value, "value", value)
    found = int(raw.value) if hasattr(raw, "value") else raw
    return found if isinstance(found, (str, int, bytes)) else None  # a structure the operations do not read


def build(attribute: Attribute) -> core_objects.Attribute:
    """The PyKMIP attribute of the door's (as :func:`read` reads it back)."""
    name, value, index = attribute.name, attribute.value, attribute.index
    if is_custom(name):
        return _custom(name, value)
    kind = enums.AttributeType(name)
    if kind is A.CRYPTOGRAPHIC_USAGE_MASK:
        return _attribute(name, kmip_attributes.CryptographicUsageMask(int(value)), index)
    if kind is A.APPLICATION_SPECIFIC_INFORMATION:
        value = {"application_namespace": value[0], "application_data": value[1]}
    elif kind in _ENUMERATED:
        value = _ENUMERATED[kind](value)
    return _FACTORY.create_attribute(kind, value, index)


_ENUMERATED: dict[enums.AttributeType, Any] = {
    A.OBJECT_TYPE: enums.ObjectType,
    A.STATE: enums.State,
    A.CRYPTOGRAPHIC_ALGORITHM: enums.CryptographicAlgorithm,
    A.CERTIFICATE_TYPE: enums.CertificateType,
}


def _custom(name: str, kind_value: list[Any]) -> core_objects.Attribute:
    kind, value = kind_value
    tag = enums.Tags.ATTRIBUTE_VALUE
    primitive = {
        "text": lambda: primitives.TextString(value, tag),
        "integer": lambda: primitives.Integer(value, tag),
        "long": lambda: primitives.LongInteger(value, tag),
        "boolean": lambda: primitives.Boolean(value, tag),
        "bytes": lambda: primitives.ByteString(bytes.fromhex(value), tag),
        "date": lambda: primitives.DateTime(value, tag),
        "interval": lambda: primitives.Interval(value, tag),
    }[kind]()
    return _attribute(name, primitive)


def _attribute(name: str, value: Any, index: int | None = None) -> core_objects.Attribute:
    return core_objects.Attribute(
        attribute_name=core_objects.Attribute.AttributeName(name),
        attribute_index=None if index is None else core_objects.Attribute.AttributeIndex(index),
        attribute_value=value,
    )


def parameters(given: Any) -> Parameters | None:
    """The door's Cryptographic Parameters of PyKMIP's (None: none given)."""
    if given is None:
        return None
    return Parameters(
        block_cipher_mode=named(spec.BlockCipherMode, given.block_cipher_mode),
        padding_method=named(spec.PaddingMethod, given.padding_method),
        hashing_algorithm=named(spec.HashingAlgorithm, given.hashing_algorithm),
        digital_signature_algorithm=named(spec.DigitalSignatureAlgorithm, given.digital_signature_algorithm),
        cryptographic_algorithm=named(spec.CryptographicAlgorithm, given.cryptographic_algorithm),
        random_iv=given.random_iv,
        iv_length=given.iv_length,
        tag_length=given.tag_length,
    )


def named(kind: Any, value: Any) -> Any:
    """The member of the door's enumeration ``kind`` of PyKMIP's ``value`` (same number; None: none)."""
    return None if value is None else kind(getattr(value, "value", value))
