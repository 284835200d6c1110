"""Bring your own key (admin): import parameters, local wrapping, import — the methods both clients inherit.

A key created with ``origin="external"`` (``create_key(..., origin="external")``) has no
material until one is imported. ``km.import_key_material("byok", material)`` does the three
steps in one call: it asks for import parameters (an RSA-2048 wrapping public key made in the
HSM, and a one-use import token), wraps ``material`` here with ``cryptography`` under that
public key, and imports it; the HSM unwraps it into a non-extractable object, so the material
never crosses the network in clear. ``AES_256_CBC_HMAC_SHA256`` keys take two parts
(``material`` for AES, ``mac_material`` for HMAC). Wrapping algorithms (AWS's names):
``RSAES_OAEP_SHA_1`` (default) and ``RSA_AES_KEY_WRAP_SHA_1`` (an ephemeral AES-256 key under
RSA-OAEP, then the material under it with RFC 5649 key wrap with padding). Never retried.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.keywrap import aes_key_wrap_with_padding

from keymanager_sdk._core import Call, _json_parser, _key, _path
from keymanager_sdk._models import Key, as_bytes, b64decode, b64encode

T = TypeVar("T")
WRAPPING_ALGORITHMS = ("RSAES_OAEP_SHA_1", "RSA_AES_KEY_WRAP_SHA_1")


@dataclass(frozen=True)
class ImportParameters:
    """A wrapping public key (DER SubjectPublicKeyInfo) and the one-use token that goes with it."""

    public_key: bytes
    import_token: str
    expires_at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImportParameters:
        expires = datetime.fromisoformat(str(data["expires_at"]))
        return cls(b64decode(data["public_key"]), str(data["import_token"]), expires)


def wrap_key_material(public_key_der: bytes, material: bytes, wrapping_algorithm: str = "RSAES_OAEP_SHA_1") -> bytes:
    """``material`` wrapped under the RSA public key as ``wrapping_algorithm`` says (see the module).

    Raises ``ValueError`` for another algorithm or a public key that is not RSA.
    """
    if wrapping_algorithm not in WRAPPING_ALGORITHMS:
        raise ValueError(f"wrapping algorithm {wrapping_algorithm!r}: expected one of {', '.join(WRAPPING_ALGORITHMS)}")
    public_key = serialization.load_der_public_key(public_key_der)
    if not isinstance(public_key, rsa.RSAPublicKey):
        raise ValueError("the wrapping public key is not an RSA key")
    oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)  # noqa: S303 - AWS's RSAES_OAEP_SHA_1
    if wrapping_algorithm == "RSAES_OAEP_SHA_1":
        return public_key.encrypt(material, oaep)
    ephemeral = os.urandom(32)
    return public_key.encrypt(ephemeral, oaep) + aes_key_wrap_with_padding(ephemeral, material)


def import_parameters_call(key: str, wrapping_algorithm: str) -> Call[ImportParameters]:
    body = {"wrapping_algorithm": wrapping_algorithm}
    parse = _json_parser(ImportParameters.from_json)
    return Call("POST", _path("keys", key, "import-parameters"), parse, json=body, key=key)


def import_call(key: str, params: ImportParameters, parts: list[bytes], wrapping_algorithm: str) -> Call[Key]:
    wrapped = [b64encode(wrap_key_material(params.public_key, part, wrapping_algorithm)) for part in parts]
    body = {"import_token": params.import_token, "encrypted_key_material": wrapped[0]}
    if len(wrapped) > 1:
        body["encrypted_mac_key_material"] = wrapped[1]
    return Call("POST", _path("keys", key, "import"), _key, json=body, key=key)


def _parts(material: object, mac_material: object) -> list[bytes]:
    parts = [as_bytes(material, "material")]
    if mac_material is not None:
        parts.append(as_bytes(mac_material, "mac_material"))
    return parts


class KeyImportMethods:
    """Key import methods of :class:`~keymanager_sdk.KeyManager`."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    def get_import_parameters(self, key: str, wrapping_algorithm: str = "RSAES_OAEP_SHA_1") -> ImportParameters:
        """Fresh import parameters for ``key`` (origin ``external``): valid 24 h, one use."""
        return self._run(import_parameters_call(key, wrapping_algorithm))

    def import_key_material(
        self,
        key: str,
        material: bytes,
        mac_material: bytes | None = None,
        wrapping_algorithm: str = "RSAES_OAEP_SHA_1",
    ) -> Key:
        """Import ``material`` (and ``mac_material``) as ``key``'s next version: parameters, wrapping
        here, import. The key as it is after the import (the new version primary)."""
        parts = _parts(material, mac_material)
        params = self.get_import_parameters(key, wrapping_algorithm)
        return self._run(import_call(key, params, parts, wrapping_algorithm))


class AsyncKeyImportMethods:
    """Key import methods of :class:`~keymanager_sdk.AsyncKeyManager` (as :class:`KeyImportMethods`, awaited)."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    async def get_import_parameters(self, key: str, wrapping_algorithm: str = "RSAES_OAEP_SHA_1") -> ImportParameters:
        """Fresh import parameters for ``key`` (origin ``external``): valid 24 h, one use."""
        return await self._run(import_parameters_call(key, wrapping_algorithm))

    async def import_key_material(
        self,
        key: str,
        material: bytes,
        mac_material: bytes | None = None,
        wrapping_algorithm: str = "RSAES_OAEP_SHA_1",
    ) -> Key:
        """Import ``material`` (and ``mac_material``) as ``key``'s next version (see the sync client)."""
        parts = _parts(material, mac_material)
        params = await self.get_import_parameters(key, wrapping_algorithm)
        return await self._run(import_call(key, params, parts, wrapping_algorithm))
