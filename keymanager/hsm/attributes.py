"""What the token says of a key version's objects, read back on request (the console's key page).

For each object of a version (its AES or HMAC secret key, or its private and public key), the
attributes a reader checks that the key never left and cannot leave the HSM: where it lives
(``CKA_TOKEN``, ``CKA_PRIVATE``), whether it can be read or taken out (``CKA_SENSITIVE``,
``CKA_EXTRACTABLE``, and ``CKA_ALWAYS_SENSITIVE``, ``CKA_NEVER_EXTRACTABLE``: it never was),
whether it was made inside the token (``CKA_LOCAL``) and what it may be used for. An attribute
the token does not give for the object's class is None. Runs on the HSM thread; never reads
``CKA_VALUE``.
"""

from __future__ import annotations

from typing import Any

from pkcs11 import Attribute, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.domain.models import HsmObjects
from keymanager.hsm.token import MissingKeyObject, Token

SHOWN = (
    Attribute.TOKEN,
    Attribute.PRIVATE,
    Attribute.SENSITIVE,
    Attribute.EXTRACTABLE,
    Attribute.ALWAYS_SENSITIVE,
    Attribute.NEVER_EXTRACTABLE,
    Attribute.LOCAL,
    Attribute.MODIFIABLE,
    Attribute.ENCRYPT,
    Attribute.DECRYPT,
    Attribute.SIGN,
    Attribute.VERIFY,
    Attribute.WRAP,
    Attribute.UNWRAP,
    Attribute.DERIVE,
)
"""The boolean attributes shown, in this order (never ``CKA_VALUE``)."""


def version_objects(token: Token, objects: HsmObjects) -> list[dict[str, Any]]:
    """Each object of a version: its role, label, class, key type, length (secret keys) and
    :data:`SHOWN` attributes by PKCS#11 name; ``missing`` for one the token no longer has."""
    roles = (
        ("encryption key", objects.enc_label, ObjectClass.SECRET_KEY),
        ("MAC key", objects.mac_label, ObjectClass.SECRET_KEY),
        ("private key", objects.private_label, ObjectClass.PRIVATE_KEY),
        ("public key", objects.public_label, ObjectClass.PUBLIC_KEY),
    )
    found = []
    for role, label, object_class in roles:
        if label is None:
            continue
        row: dict[str, Any] = {"role": role, "label": label, "class": f"CKO_{object_class.name}"}
        try:
            obj = token.token_object(label, object_class)
        except MissingKeyObject:
            found.append({**row, "missing": True})
            continue
        key_type = _read(obj, Attribute.KEY_TYPE)
        row["key_type"] = None if key_type is None else f"CKK_{getattr(key_type, 'name', key_type)}"
        if object_class is ObjectClass.SECRET_KEY:
            row["value_len"] = _read(obj, Attribute.VALUE_LEN)
        row["attributes"] = {f"CKA_{attribute.name}": _read(obj, attribute) for attribute in SHOWN}
        found.append({**row, "missing": False})
    return found


def _read(obj: Any, attribute: Attribute) -> Any:
    try:
        value = obj[attribute]
    except (p11.AttributeTypeInvalid, p11.AttributeSensitive):
        return None
    return value if isinstance(value, bool | int) or value is None else getattr(value, "name", str(value))
