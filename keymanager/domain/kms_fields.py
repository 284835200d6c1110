"""The AWS KMS API's request fields, read as AWS's model constrains them, and its blobs as JSON 1.1 carries them.

Each reader takes the request's parameters and a field's name: SerializationException
(:class:`~keymanager.domain.kms.KmsError`) for a value of another JSON type, ValidationException in
AWS's own words (never the value given) for one outside the model's constraints or a required one
missing, UnsupportedOperationException for what this service does not do. Pure: no HTTP.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from keymanager import errors
from keymanager.domain.ciphertext import canonical_context
from keymanager.domain.kms import AWS_ONLY, MAX_REF_CHARS, KmsError, unsupported

E = TypeVar("E", bound=StrEnum)


def string(params: Mapping[str, Any], name: str, *, required: bool = False, limit: int = MAX_REF_CHARS) -> str | None:
    """Field ``name`` as a string (SerializationException for another type, ValidationException when missing)."""
    value = params.get(name)
    if value is None:
        if required:
            raise _constraint("Value null", name, "not be null")
        return None
    if not isinstance(value, str):
        raise KmsError("SerializationException", f"{name} must be a string")
    if not 1 <= len(value) <= limit:
        raise _length(name, len(value), 1, limit)
    return value


def integer(params: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise KmsError("SerializationException", f"{name} must be an integer")
    if not low <= value <= high:
        raise KmsError("ValidationException", f"{name} must be between {low} and {high}")
    return value


def blob(params: Mapping[str, Any], name: str, *, low: int, high: int, required: bool = True) -> bytes | None:
    """Field ``name``: standard base64 of ``low``..``high`` bytes."""
    value = params.get(name)
    if value is None:
        if required:
            raise _constraint("Value null", name, "not be null")
        return None
    if not isinstance(value, str):
        raise KmsError("SerializationException", f"{name} must be a base64 string")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise KmsError("SerializationException", f"{name} is not valid base64") from None
    if not low <= len(data) <= high:
        raise _length(name, len(data), low, high)
    return data


def _length(name: str, length: int, low: int, high: int) -> KmsError:
    bound = f"greater than or equal to {low}" if length < low else f"less than or equal to {high}"
    return _constraint("Value", name, f"have length {bound}")


def _constraint(value: str, name: str, rule: str) -> KmsError:
    """AWS's words for a field that breaks its model's constraint (``Plaintext`` is ``'plaintext'``; as
    for AWS's sensitive fields, never the value given)."""
    message = f"1 validation error detected: {value} at '{name[:1].lower() + name[1:]}' failed to satisfy constraint"
    return KmsError("ValidationException", f"{message}: Member must {rule}")


def context(params: Mapping[str, Any], name: str = "EncryptionContext") -> dict[str, str] | None:
    """An encryption context: a map of strings within the bound of ``ciphertext.canonical_context``."""
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise KmsError("SerializationException", f"{name} must be a map of strings to strings")
    try:
        canonical_context(value)
    except errors.InvalidRequest as exc:
        raise KmsError("ValidationException", f"{name}: {exc.message}") from None
    return value


def check_common(params: Mapping[str, Any]) -> None:
    """Fields any operation may carry: grant tokens (accepted, grant nothing), DryRun and
    ``Recipient`` (Nitro enclaves' attestation: refused)."""
    tokens = params.get("GrantTokens")
    if tokens is not None and (not isinstance(tokens, list) or len(tokens) > 10):
        raise KmsError("ValidationException", "GrantTokens is a list of at most 10 tokens")
    if params.get("DryRun") is True:
        raise unsupported("DryRun")
    if params.get("Recipient") is not None:
        raise unsupported("Recipient")


def choice(params: Mapping[str, Any], name: str, names: type[E], *, required: bool = False) -> E | None:
    """Field ``name`` as one of the enum ``names`` (AWS's names): ValidationException for an unknown
    name or a missing required one, UnsupportedOperationException for a name of AWS's no row has."""
    value = string(params, name, required=required, limit=64)
    if value is None:
        return None
    try:
        return names(value)
    except ValueError:
        if value in AWS_ONLY:
            raise unsupported(f"{name} {value}") from None
        allowed = ", ".join(member.value for member in names)
        raise KmsError("ValidationException", f"{name} must be one of {allowed}") from None


def data(value: bytes) -> str:
    """A blob as JSON 1.1 carries it: standard base64."""
    return base64.b64encode(value).decode()
