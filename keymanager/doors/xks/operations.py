"""GetKeyMetadata, Encrypt and Decrypt of the XKS proxy API, on the keys of the services.

A key store sees a key when the key's policy names it under any right (``services/keys.py``
``visible``; else KeyNotFoundException). Its ``keyUsage`` lists ``ENCRYPT`` when the policy lets
the store ``encrypt`` and ``DECRYPT`` when it lets it ``decrypt`` (``require_use``, the rule every
door asks); only an ``AES_256_GCM`` key has either. Encrypt and Decrypt use the key through
:class:`~keymanager.services.crypto.CryptoService` (policy, state, size, the HSM): a policy's
refusal is InvalidKeyUsageException, a key that is not enabled InvalidStateException (its
``keyStatus`` is ``DISABLED``). Errors are raised as the service's; the door translates them
with :func:`keymanager.domain.xks.xks_error`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from keymanager.domain import xks
from keymanager.domain.key_specs import spec_of
from keymanager.domain.models import Key, KeyState, Principal
from keymanager.domain.policy import Operation
from keymanager.errors import DecryptionFailed, Forbidden, InvalidRequest
from keymanager.services.crypto import CryptoService
from keymanager.services.key_use import require_use
from keymanager.services.keys import visible
from keymanager.services.snapshot import Snapshot

_USAGES = ((Operation.ENCRYPT, "ENCRYPT"), (Operation.DECRYPT, "DECRYPT"))


@dataclass
class XksCall:
    """One XKS request of an authenticated key store: what its audit record names."""

    principal: Principal
    path: xks.XksPath
    params: Mapping[str, Any]
    key_id: str | None = None
    key_version: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    """The request's ``requestMetadata`` (the known fields), for its audit record."""


XksOperation = Callable[[Snapshot, XksCall], Awaitable[dict[str, Any]]]


class XksService:
    """The key operations of the XKS proxy API (see the module docstring)."""

    def __init__(self, crypto: CryptoService) -> None:
        self._crypto = crypto
        self.operations: dict[str, XksOperation] = {
            "GetKeyMetadata": self.metadata,
            "Encrypt": self.encrypt,
            "Decrypt": self.decrypt,
        }

    async def metadata(self, snapshot: Snapshot, call: XksCall) -> dict[str, Any]:
        """``keySpec``, ``keyUsage`` and ``keyStatus`` of the external key."""
        key = await self._key(snapshot, call)
        usage = [name for operation, name in _USAGES if _may(key, call.principal, operation)]
        spec = spec_of(key.algorithm).xks_spec
        return {
            "keySpec": spec or key.algorithm.value,
            "keyUsage": usage if spec is not None else [],
            "keyStatus": "ENABLED" if key.state is KeyState.ENABLED else "DISABLED",
        }

    async def encrypt(self, snapshot: Snapshot, call: XksCall) -> dict[str, Any]:
        """AES-GCM under the key's primary version with the caller's AAD (and, when asked, the CDIV,
        computed before the result is opened once more in the HSM, as the spec's Appendix C says).
        A CDIV is an answer that decrypts: it is asked of a key the store may decrypt with only
        (else InvalidKeyUsageException, before anything is encrypted)."""
        params = call.params
        xks.require_algorithm(params)
        integrity = xks.wants_integrity_value(params)
        plaintext = xks.blob(params, "plaintext", high=xks.MAX_PLAINTEXT_BYTES)
        aad = xks.blob(params, "additionalAuthenticatedData", high=xks.MAX_AAD_BYTES, required=False) or b""
        assert plaintext is not None
        key = await self._gcm_key(snapshot, call)
        if integrity:
            _require(
                key, call.principal, Operation.DECRYPT, "a ciphertextDataIntegrityValue is confirmed by decrypting"
            )
        sealed = await self._crypto.seal_with_aad(
            snapshot, call.principal, key.id, plaintext, lambda version: xks.gcm_aad(aad, xks.metadata_of(version))
        )
        call.key_id, call.key_version = sealed.key_id, sealed.key_version
        metadata = xks.metadata_of(sealed.key_version)
        answer = {
            "ciphertext": xks.encode(sealed.ciphertext),
            "ciphertextMetadata": xks.encode(metadata),
            "initializationVector": xks.encode(sealed.iv),
            "authenticationTag": xks.encode(sealed.tag),
        }
        if integrity:
            value = xks.integrity_value(aad, metadata, sealed.iv, sealed.ciphertext, sealed.tag)
            try:
                await self._crypto.confirm_sealed(sealed, xks.gcm_aad(aad, metadata))
            except DecryptionFailed:
                raise xks.XksError("InternalException", "the ciphertext made did not open again") from None
            answer["ciphertextDataIntegrityValue"] = xks.encode(value)
        return answer

    async def decrypt(self, snapshot: Snapshot, call: XksCall) -> dict[str, Any]:
        """The plaintext; every failure of the ciphertext, IV, tag, AAD or metadata is InvalidCiphertextException."""
        aad, sealed, iv, tag, version = xks.ciphertext_fields(call.params)
        xks.require_algorithm(call.params)
        key = await self._gcm_key(snapshot, call)
        call.key_version = version
        opened = await self._crypto.open_with_aad(
            snapshot, call.principal, key.id, version, iv + sealed + tag, xks.gcm_aad(aad, xks.metadata_of(version))
        )
        return {"plaintext": xks.encode(opened.plaintext)}

    async def _key(self, snapshot: Snapshot, call: XksCall) -> Key:
        """The external key, if the key store may see it; KeyNotFound or KeyUnseen otherwise."""
        assert call.path.key_id is not None
        key = await snapshot.key(call.path.key_id)
        try:
            visible(key, call.principal)
        except Forbidden:
            raise xks.KeyUnseen() from None
        call.key_id = key.id
        return key

    async def _gcm_key(self, snapshot: Snapshot, call: XksCall) -> Key:
        """:meth:`_key`, and InvalidKeyUsageException unless its spec is one XKS serves (an XKS
        ``keySpec`` in the table of key types: ``AES_256_GCM``)."""
        key = await self._key(snapshot, call)
        if spec_of(key.algorithm).xks_spec is None:
            raise xks.XksError("InvalidKeyUsageException", f"an {key.algorithm.value} key does not serve XKS")
        return key


def _require(key: Key, principal: Principal, operation: Operation, why: str) -> None:
    """Forbidden (InvalidKeyUsageException at this door; read afresh if the policy changed) unless the
    key's policy lets ``principal`` do ``operation`` (``require_use``, the rule of every door)."""
    try:
        require_use(key, principal, operation)
    except Forbidden as exc:
        raise Forbidden(f"{why}: {exc.message}") from None


def _may(key: Key, principal: Principal, operation: Operation) -> bool:
    try:
        require_use(key, principal, operation)
    except (Forbidden, InvalidRequest):
        return False
    return True
