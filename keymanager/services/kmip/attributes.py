"""KMIP attributes: what a client sets (Create, Register, Add/Modify/DeleteAttribute) as the JSON kept
with the object, and what it reads back (Get/GetAttributes, GetAttributeList, Locate).

The JSON (``Key.attributes``, a registered object's ``attributes``):
``{"owner": principal id, "names": [...], "usage_mask": int, "object_groups": [...],
"contact": str, "policy_name": str, "app_info": [[namespace, data], ...], "dates": {name: epoch},
"revocation": [reason, message], "custom": {"x-name": [type, value], ...}, "algorithm": name,
"length": bits}``. Bounded: :data:`MAX_VALUES` values in all, text of :data:`MAX_TEXT` characters.
Attributes the server derives (Unique Identifier, Object Type, State, Cryptographic Algorithm and
Length of a key, dates it keeps) are read-only; a standard attribute this server does not keep is
refused by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kmip.core import attributes as kmip_attributes
from kmip.core import enums, primitives
from kmip.core import objects as core_objects
from kmip.core.factories.attributes import AttributeFactory

from keymanager.services.kmip.refusals import KmipRefusal, Reason, invalid

A = enums.AttributeType
MAX_VALUES = 64
"""Most attribute values one object holds (names, groups, custom attributes together)."""
MAX_TEXT = 1024
"""Longest text (or byte string, in bytes) of one attribute value."""

MULTI = {
    A.NAME.value: "names",
    A.OBJECT_GROUP.value: "object_groups",
    A.APPLICATION_SPECIFIC_INFORMATION.value: "app_info",
}
"""The multi-valued attributes a client sets, and their lists in the JSON."""
SINGLE = {
    A.CRYPTOGRAPHIC_USAGE_MASK.value: "usage_mask",
    A.CONTACT_INFORMATION.value: "contact",
    A.OPERATION_POLICY_NAME.value: "policy_name",
}
DATES = (A.ACTIVATION_DATE.value, A.DEACTIVATION_DATE.value, A.PROCESS_START_DATE.value, A.PROTECT_STOP_DATE.value)
"""Dates a client may set."""
READ_ONLY = frozenset(
    {
        A.UNIQUE_IDENTIFIER.value,
        A.OBJECT_TYPE.value,
        A.STATE.value,
        A.CRYPTOGRAPHIC_ALGORITHM.value,
        A.CRYPTOGRAPHIC_LENGTH.value,
        A.INITIAL_DATE.value,
        A.DESTROY_DATE.value,
        A.COMPROMISE_DATE.value,
        A.COMPROMISE_OCCURRENCE_DATE.value,
        A.REVOCATION_REASON.value,
        A.CERTIFICATE_TYPE.value,
        A.LAST_CHANGE_DATE.value,
        A.ORIGINAL_CREATION_DATE.value,
        A.SENSITIVE.value,
        A.EXTRACTABLE.value,
        A.CRYPTOGRAPHIC_PARAMETERS.value,
    }
)
"""Standard attributes the server keeps itself (a client names some at creation: checked there)."""
DATE_ATTRIBUTES = frozenset(
    {
        *DATES,
        A.INITIAL_DATE.value,
        A.DESTROY_DATE.value,
        A.COMPROMISE_DATE.value,
        A.COMPROMISE_OCCURRENCE_DATE.value,
        A.LAST_CHANGE_DATE.value,
        A.ORIGINAL_CREATION_DATE.value,
    }
)
"""Every date attribute (Locate takes two values of one as a range)."""
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


def is_custom(name: str) -> bool:
    """Whether ``name`` is a custom attribute's (``x-`` set by clients, ``y-`` by servers)."""
    return name[:2] in ("x-", "y-", "X-", "Y-")


def parsed(attribute: core_objects.Attribute) -> tuple[str, int | None, Any]:
    """``(name, index, value)`` of a PyKMIP attribute, its value as the JSON keeps it."""
    name = str(attribute.attribute_name.value)
    index = None if attribute.attribute_index is None else int(attribute.attribute_index.value)
    return name, index, _json_value(name, attribute.attribute_value)


def _json_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == A.NAME.value:
        return _text(str(value.name_value.value))
    if name == A.APPLICATION_SPECIFIC_INFORMATION.value:
        return [_text(str(value.application_namespace)), _text(str(value.application_data))]
    if is_custom(name):
        kind = next((name for cls, name in _CUSTOM_TYPES.items() if isinstance(value, cls)), None)
        if kind is None:
            raise invalid(f"the custom attribute {name[:64]} has a type this server does not keep")
        raw = value.value
        if kind == "bytes":
            return [kind, _bytes(raw).hex()]
        if kind == "enumeration":
            raw = getattr(raw, "value", raw)
        return [kind, _text(raw) if isinstance(raw, str) else raw]
    raw = getattr(value, "value", value)
    return int(raw.value) if hasattr(raw, "value") else (_text(raw) if isinstance(raw, str) else raw)


def _text(value: str) -> str:
    if len(value) > MAX_TEXT:
        raise invalid(f"an attribute value is limited to {MAX_TEXT} characters")
    return value


def _bytes(value: bytes) -> bytes:
    if len(value) > MAX_TEXT:
        raise invalid(f"an attribute value is limited to {MAX_TEXT} bytes")
    return bytes(value)


def client_attributes(template: Iterable[core_objects.Attribute]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attributes a client gave at creation: the JSON of those it may set, and the rest (the
    server's, which it checks itself: algorithm, length, Sensitive, Extractable) by name."""
    kept: dict[str, Any] = {}
    server: dict[str, Any] = {}
    for attribute in template:
        name, _, value = parsed(attribute)
        if name in READ_ONLY:
            server[name] = value
        else:
            add(kept, name, value)
    return kept, server


def add(kept: dict[str, Any], name: str, value: Any) -> None:
    """Add one value of attribute ``name`` to ``kept`` (KMIP's AddAttribute): a multi-valued one gets
    one more, a single-valued one must be absent; InvalidField for one the server keeps itself."""
    _settable(name)
    if name in MULTI:
        kept.setdefault(MULTI[name], []).append(value)
    elif name in SINGLE or name in DATES or is_custom(name):
        slot, field = _slot(kept, name)
        if field in slot:
            raise KmipRefusal(
                Reason.INVALID_FIELD, f"the object has a {name[:64]} already (ModifyAttribute changes it)"
            )
        slot[field] = value
    _bounded(kept)


def modify(kept: dict[str, Any], name: str, index: int | None, value: Any) -> None:
    """Change the value (at ``index``, default 0) of attribute ``name``; ItemNotFound when it has none."""
    _settable(name)
    if name in MULTI:
        values = kept.get(MULTI[name], [])
        position = index or 0
        if position >= len(values):
            raise KmipRefusal(Reason.ITEM_NOT_FOUND, f"the object has no {name} at index {position}", 404)
        values[position] = value
        return
    slot, field = _slot(kept, name)
    if field not in slot:
        raise KmipRefusal(Reason.ITEM_NOT_FOUND, f"the object has no {name[:64]}", 404)
    slot[field] = value


def delete(kept: dict[str, Any], name: str, index: int | None, value: Any = None) -> list[tuple[int | None, Any]]:
    """Remove attribute ``name`` (the value at ``index``, or equal to ``value``, or every value) and
    answer what was removed, each value with its index (None for a single-valued attribute);
    ItemNotFound when there is no such value."""
    _settable(name)
    if name in MULTI:
        values = kept.get(MULTI[name], [])
        if value is not None and value in values:
            position = values.index(value)
            return [(position, values.pop(position))]
        if value is None and index is not None and index < len(values):
            return [(index, values.pop(index))]
        if value is None and index is None and values:
            removed: list[tuple[int | None, Any]] = list(enumerate(values))
            values.clear()
            return removed
        raise KmipRefusal(Reason.ITEM_NOT_FOUND, f"the object has no such {name}", 404)
    slot, field = _slot(kept, name)
    gone = slot.pop(field, None)
    if gone is None:
        raise KmipRefusal(Reason.ITEM_NOT_FOUND, f"the object has no {name[:64]}", 404)
    return [(None, gone)]


def _settable(name: str) -> None:
    if name in READ_ONLY:
        raise KmipRefusal(Reason.PERMISSION_DENIED, f"the {name} attribute is kept by the server", 403)
    if name not in MULTI and name not in SINGLE and name not in DATES and not is_custom(name):
        raise invalid(f"the {name[:64]} attribute is not supported by this server")


def _slot(kept: dict[str, Any], name: str) -> tuple[dict[str, Any], str]:
    if name in SINGLE:
        return kept, SINGLE[name]
    if name in DATES:
        return kept.setdefault("dates", {}), name
    return kept.setdefault("custom", {}), name


def _bounded(kept: Mapping[str, Any]) -> None:
    count = sum(len(kept.get(field, [])) for field in MULTI.values()) + len(kept.get("custom", {}))
    if count > MAX_VALUES:
        raise invalid(f"an object holds at most {MAX_VALUES} names, groups and custom attributes")


def facts(kept: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The attributes a client set (``kept``), as attribute name to its values (JSON, as :func:`parsed` gives them)."""
    found: dict[str, list[Any]] = {}
    for name, field in MULTI.items():
        if kept.get(field):
            found[name] = list(kept[field])
    for name, field in SINGLE.items():
        if kept.get(field) is not None:
            found[name] = [kept[field]]
    for name, stamp in kept.get("dates", {}).items():
        found[name] = [stamp]
    for name, value in kept.get("custom", {}).items():
        found[name] = [value]
    return found


def build(name: str, value: Any, index: int | None = None) -> core_objects.Attribute:
    """The PyKMIP attribute ``name`` of JSON ``value`` (as :func:`parsed` reads it back)."""
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


def built(found: Mapping[str, list[Any]], wanted: Iterable[str] | None = None) -> list[core_objects.Attribute]:
    """The PyKMIP attributes of ``found`` (attribute name to values), only those named in ``wanted`` if given."""
    names = list(found) if wanted is None else [name for name in wanted if name in found]
    attributes = []
    for name in names:
        values = found[name]
        for index, value in enumerate(values):
            attributes.append(build(name, value, index if name in MULTI else None))
    return attributes


def matches_all(found: Mapping[str, list[Any]], wanted: Iterable[tuple[str, Any]]) -> bool:
    """Whether an object with attributes ``found`` matches every Locate criterion ``(name, value)``:
    one of its values equals each (a usage mask: holds all its bits); a date attribute named twice is
    a range, both ends included (KMIP 1.x and 2.0, Locate)."""
    criteria: dict[str, list[Any]] = {}
    for name, value in wanted:
        criteria.setdefault(name, []).append(value)
    for name, values in criteria.items():
        if name in DATE_ATTRIBUTES and len(values) == 2:
            low, high = sorted(int(v) for v in values)
            if not any(low <= int(v) <= high for v in found.get(name, [])):
                return False
        elif not all(_matches(found, name, value) for value in values):
            return False
    return True


def _matches(found: Mapping[str, list[Any]], name: str, value: Any) -> bool:
    values = found.get(name)
    if not values:
        return False
    if name == A.CRYPTOGRAPHIC_USAGE_MASK.value:
        return any(int(v) & int(value) == int(value) for v in values)
    return value in values


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
