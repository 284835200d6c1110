"""The name rules of the contract: key names, key ids, principal names and managed objects' ids.

Every reference taken from a URL is checked against these rules before anything else is
done with it, so nothing longer than a name can reach a database query, a cache or an
audit record.
"""

from __future__ import annotations

import re

KEY_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,127}")
"""A key name: 1-128 letters, digits, ``_``, ``.`` or ``-``, starting with a letter (and not a key id)."""
KEY_ID = re.compile(r"[0-9a-f]{32}")
"""A key id: 32 lowercase hex digits."""
KMS_AUTO_NAME = re.compile(r"kms-[0-9a-f]{32}")
"""The name the KMS door gives a key it creates without an alias (``domain/kms.py``
``unaliased_name``): no one else may name a key so, or it would pass for such a key."""
PRINCIPAL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
"""A principal name: 1-64 letters, digits, ``_``, ``.`` or ``-``, starting with a letter."""

KEY_NAME_RULE = (
    "a key name is 1-128 letters, digits, '_', '.' or '-', starting with a letter, and neither 32 hex digits "
    "nor 'kms-' and 32 hex digits (the name of a KMS key without an alias)"
)
KEY_REF_RULE = "a key is named by its name (1-128 letters, digits, '_', '.' or '-', starting with a letter) or its id"
PRINCIPAL_NAME_RULE = "a principal name is 1-64 letters, digits, '_', '.' or '-', starting with a letter"
OBJECT_ID_RULE = "a managed object is named by its id: 32 lowercase hex digits"


def is_key_name(name: str, *, kms_auto_named: bool = False) -> bool:
    """Whether ``name`` may name a new key: never a key id's form, and the form of a KMS auto-name
    (:data:`KMS_AUTO_NAME`) only for the KMS door's own (``kms_auto_named``)."""
    if KEY_NAME.fullmatch(name) is None or KEY_ID.fullmatch(name) is not None:
        return False
    return kms_auto_named or KMS_AUTO_NAME.fullmatch(name) is None


def is_key_ref(ref: str) -> bool:
    """Whether ``ref`` can name or identify a key (the ``{key}`` of a URL)."""
    return KEY_NAME.fullmatch(ref) is not None or KEY_ID.fullmatch(ref) is not None


def is_object_id(ref: str) -> bool:
    """Whether ``ref`` can name a managed object (its id, made as a key's: ``credentials.new_id``)."""
    return KEY_ID.fullmatch(ref) is not None


def is_principal_name(name: str) -> bool:
    """Whether ``name`` can name a principal."""
    return PRINCIPAL_NAME.fullmatch(name) is not None
