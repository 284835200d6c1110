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

from keymanager.doors.kmip import spec
from keymanager.doors.kmip.refusals import KmipRefusal, Reason, invalid
from keymanager.doors.kmip.requests import Attribute

A = spec.AttributeType
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


def is_custom(name: str) -> bool:
    """Whether ``name`` is a custom attribute's (``x-`` set by clients, ``y-`` by servers)."""
    return name[:2] in ("x-", "y-", "X-", "Y-")


def parsed(attribute: Attribute) -> tuple[str, int | None, Any]:
    """``(name, index, value)`` of an attribute a client gave, its value as the JSON keeps it;
    refused when the codec could not read it, or when a text is longer than :data:`MAX_TEXT`."""
    if attribute.error is not None:
        raise attribute.error
    _bounded_text(attribute.value, custom=is_custom(attribute.name))
    return attribute.name, attribute.index, attribute.value


def tagged(attribute: Attribute | None) -> tuple[str, Any]:
    """KMIP 2.0's New or Current Attribute: its name and JSON value; Missing Data when there is none."""
    if attribute is None:
        raise KmipRefusal(Reason.MISSING_DATA, "the request names no attribute")
    name, _, value = parsed(attribute)
    return name, value


def _bounded_text(value: Any, *, custom: bool) -> None:
    if custom and isinstance(value, list) and value and value[0] == "bytes":
        if len(value[1]) // 2 > MAX_TEXT:
            raise invalid(f"an attribute value is limited to {MAX_TEXT} bytes")
        return
    for text in value if isinstance(value, list) else [value]:
        if isinstance(text, str) and len(text) > MAX_TEXT:
            raise invalid(f"an attribute value is limited to {MAX_TEXT} characters")


def client_attributes(template: Iterable[Attribute]) -> tuple[dict[str, Any], dict[str, Any]]:
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


def built(found: Mapping[str, list[Any]], wanted: Iterable[str] | None = None) -> list[Attribute]:
    """The attributes of ``found`` (attribute name to values), only those named in ``wanted`` if given."""
    names = list(found) if wanted is None else [name for name in wanted if name in found]
    attributes = []
    for name in names:
        values = found[name]
        for index, value in enumerate(values):
            attributes.append(Attribute(name, index if name in MULTI else None, value))
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
