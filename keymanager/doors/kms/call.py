"""One AWS KMS request as the translations see it (:class:`Call`), and what several of them share:
paging (:func:`page`) and spelling a ciphertext the service just made as a ``CiphertextBlob``
(:func:`blob_of`)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from keymanager.domain import ciphertext as ct
from keymanager.domain import kms, kms_blob, kms_fields
from keymanager.domain.models import Algorithm, Principal
from keymanager.services.crypto_results import Encrypted

T = TypeVar("T")


@dataclass
class Call:
    """One KMS request: who, where (region of the signature), what; what its audit record names."""

    principal: Principal
    region: str
    account: str
    params: Mapping[str, Any]
    key_id: str | None = None
    key_version: int | None = None
    key_ref: str | None = None
    """The last key reference the request named (its audit record names that key when refused)."""

    @property
    def partition(self) -> str:
        """The AWS partition of the request's region (``aws-cn`` for ``cn-*``, …): its ARNs' first field."""
        return kms.partition(self.region)

    def arn(self, key_id: str) -> str:
        return kms.key_arn(key_id, self.region, self.account)

    def ref(self, field: str = "KeyId") -> str:
        """The native reference of the (required) key field ``field``."""
        value = kms_fields.string(self.params, field, required=True)
        assert value is not None
        self.key_ref = kms.resolve(value, self.account)
        return self.key_ref

    def noted(self, key_id: str, key_version: int | None = None) -> None:
        self.key_id, self.key_version = key_id, key_version


def page(
    params: Mapping[str, Any], items: Sequence[T], *, most: int = 1000, default: int = 100
) -> tuple[list[T], dict[str, Any]]:
    """One page of ``items`` (``Limit`` 1-``most``) from ``Marker`` (an offset, as AWS's opaque
    string), and the answer's ``Truncated`` and (when truncated) ``NextMarker``."""
    limit = kms_fields.integer(params, "Limit", 1, most) or default
    marker = kms_fields.string(params, "Marker", limit=16)
    start = 0
    if marker is not None:
        if not marker.isdigit():
            raise kms.KmsError("InvalidMarkerException", "the marker is not one this service gave")
        start = int(marker)
    end = start + limit
    rest: dict[str, Any] = {"Truncated": end < len(items)}
    if end < len(items):
        rest["NextMarker"] = str(end)
    return list(items[start:end]), rest


def blob_of(done: Encrypted, algorithm: Algorithm) -> str:
    """The blob (base64) of a ciphertext the service just made under a key of ``algorithm`` (so its
    text needs no checks: ~4x cheaper than parsing)."""
    body = base64.b64decode(done.ciphertext.rsplit(":", 1)[1])
    return kms_fields.data(kms_blob.encode(ct.Ciphertext(done.key_id, done.key_version, body), algorithm))
