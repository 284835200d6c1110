"""Transit's operations on key material as calls of ``CryptoService`` and ``AsymmetricService``.

Ciphertexts are ``vault:v<N>:base64(nonce ‖ ciphertext ‖ tag)``: AES-GCM in the HSM under version N,
a nonce the HSM's side makes (never the caller's: ``nonce`` is refused), the caller's
``associated_data`` as the only AAD (``CryptoService.seal_with_aad``). Every failure of a ciphertext's
body (encoding, length, tag, another key's, other associated data) is the one
:data:`~keymanager.doors.transit.codec.DECRYPTION_FAILED`; a version 0, beyond the latest or below
``min_decryption_version`` is read from the prefix and has its own message. Batches (``batch_input``,
at most the service's batch size) answer one result or ``error`` per item, in order, with Vault's
status: 400 when an item failed (the caller's ``partial_failure_response_code`` when others succeeded).
``hash`` is computed in software, as Vault does. MACs and signatures: ``signing.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from keymanager.db.transit import TransitStore
from keymanager.domain.models import Key
from keymanager.domain.policy import Operation
from keymanager.doors.transit import codec
from keymanager.doors.transit.codec import DECRYPTION_FAILED, TOO_OLD, invalid
from keymanager.doors.transit.keys import TransitCall, transit_spec
from keymanager.errors import DecryptionFailed, InvalidRequest, KeyManagerError, PayloadTooLarge, VersionBelowMinimum
from keymanager.hsm import Hsm
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.crypto import CryptoService
from keymanager.services.snapshot import Snapshot

_COMMON = frozenset({"name", "batch_input", "partial_failure_response_code"})
_ENCRYPT = _COMMON | {"plaintext", "context", "nonce", "key_version", "associated_data", "reference"}
_ENCRYPT |= {"type", "convergent_encryption", "padding_scheme"}
_DECRYPT = _COMMON | {"ciphertext", "context", "nonce", "associated_data", "reference", "padding_scheme"}
_REWRAP = _DECRYPT | {"key_version", "encrypt_padding_scheme", "decrypt_padding_scheme"}
_ITEM_ERRORS = (InvalidRequest, DecryptionFailed, VersionBelowMinimum, PayloadTooLarge, codec.TransitError)
"""What fails one item of a batch; any other error (the key's state, policy, the HSM) fails the request."""


class Operations:
    """What every Transit operation on key material shares: the services, the named key, the version it
    may encrypt with, one item or a batch of them."""

    def __init__(
        self, crypto: CryptoService, asymmetric: AsymmetricService, store: TransitStore, hsm: Hsm, *, max_batch: int
    ) -> None:
        self._crypto = crypto
        self._asymmetric = asymmetric
        self._store = store
        self._hsm = hsm
        self._max_batch = max_batch

    # -- steps ---------------------------------------------------------------------------
    async def _key(self, snapshot: Snapshot, call: TransitCall) -> Key:
        """The named key, if Transit serves its spec (the core checks policy and state where it is used)."""
        key = call.used(await snapshot.key(call.name))
        transit_spec(key)
        return key

    async def _encryption_version(self, key: Key, params: Mapping[str, Any], where: str) -> int | None:
        """The version ``key_version`` asks for (None: the latest), against ``min_encryption_version``."""
        wanted = codec.number(params, "key_version", where=where)
        if not wanted:
            return None
        if wanted > key.primary_version:
            raise invalid(f"{where}key_version: requested version for encryption is higher than the latest key version")
        settings = await asyncio.to_thread(self._store.settings, key.id)
        if wanted < settings.min_encryption_version:
            raise invalid(
                f"{where}key_version: requested version for encryption is less than the minimum encryption key version"
            )
        return wanted

    async def _each(
        self,
        call: TransitCall,
        field: str,
        item: Callable[[Mapping[str, Any], str], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """One item (the body's fields), or each item of ``batch_input`` with its own result or error."""
        batch = call.params.get("batch_input")
        if batch is None:
            if field not in call.params and field != "input":
                raise invalid(f"missing {field}")
            return await item(call.params, "")
        items = _batch(batch, self._max_batch)
        results = await asyncio.gather(*(item(one, f"[{i}].") for i, one in enumerate(items)), return_exceptions=True)
        shown: list[dict[str, Any]] = []
        for one, result in zip(items, results, strict=True):
            if isinstance(result, _ITEM_ERRORS):
                shown.append({"error": _message(result)})
            elif isinstance(result, BaseException):
                raise result
            else:
                shown.append(result)
            if "reference" in one:
                shown[-1]["reference"] = codec.text(one, "reference", limit=1024)
        failed = sum("error" in one for one in shown)
        call.details["batch"] = {"items": len(shown), "failed": failed}
        if failed:
            partial = codec.number(call.params, "partial_failure_response_code", low=1, high=599)
            call.status = partial if partial and failed < len(shown) else 400
        return {"batch_results": shown}


class TransitCrypto(Operations):
    """``encrypt``, ``decrypt``, ``rewrap``, ``datakey``, ``random`` and ``hash`` (see the module docstring)."""

    # -- encryption ------------------------------------------------------------------------
    async def encrypt(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``encrypt/<name>``: each plaintext sealed under the latest version (or ``key_version``)."""
        codec.only(call.params, _ENCRYPT)
        codec.text(call.params, "type")  # an upsert's type: keys are never made by encrypt here
        key = await self._key(snapshot, call)

        async def item(params: Mapping[str, Any], where: str) -> dict[str, Any]:
            plaintext = codec.decoded(params, "plaintext", limit=1 << 26, where=where)
            aad = _aad(params, where)
            version = await self._encryption_version(key, params, where)
            sealed = await self._crypto.seal_with_aad(
                snapshot, call.principal, key.id, plaintext, lambda _: aad, version=version
            )
            call.used(key, sealed.key_version)
            body = sealed.iv + sealed.ciphertext + sealed.tag
            return {"ciphertext": codec.tagged(sealed.key_version, body), "key_version": sealed.key_version}

        return await self._each(call, "plaintext", item)

    async def decrypt(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``decrypt/<name>``: each ciphertext's plaintext."""
        codec.only(call.params, _DECRYPT)
        key = await self._key(snapshot, call)

        async def item(params: Mapping[str, Any], where: str) -> dict[str, Any]:
            version, body = _ciphertext(key, params, where)
            opened = await self._crypto.open_with_aad(
                snapshot, call.principal, key.id, version, body, _aad(params, where)
            )
            call.used(key, opened.key_version)
            return {"plaintext": codec.encoded(opened.plaintext)}

        return await self._each(call, "ciphertext", item)

    async def rewrap(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``rewrap/<name>``: each ciphertext sealed again under the latest version (or ``key_version``),
        with the ``reencrypt`` right only; the plaintext never leaves the service."""
        codec.only(call.params, _REWRAP)
        key = await self._key(snapshot, call)

        async def item(params: Mapping[str, Any], where: str) -> dict[str, Any]:
            version, body = _ciphertext(key, params, where)
            aad = _aad(params, where)
            wanted = await self._encryption_version(key, params, where)
            opened = await self._crypto.open_with_aad(
                snapshot, call.principal, key.id, version, body, aad, operation=Operation.REENCRYPT
            )
            sealed = await self._crypto.seal_with_aad(
                snapshot,
                call.principal,
                key.id,
                opened.plaintext,
                lambda _: aad,
                version=wanted,
                operation=Operation.REENCRYPT,
            )
            call.used(key, sealed.key_version)
            text = codec.tagged(sealed.key_version, sealed.iv + sealed.ciphertext + sealed.tag)
            return {"ciphertext": text, "key_version": sealed.key_version}

        return await self._each(call, "ciphertext", item)

    async def datakey(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``datakey/plaintext|wrapped/<name>``: random bits from the HSM, sealed under the latest version."""
        codec.only(call.params, {"name", "context", "nonce", "bits", "key_version"})
        kind = call.route.kind
        if kind not in ("plaintext", "wrapped"):
            raise invalid(f"invalid type: {kind} (plaintext or wrapped)")
        call.details["kind"] = kind
        bits = codec.number(call.params, "bits", low=1, high=8192) or 256
        if bits not in (128, 256, 512):
            raise invalid("bits: must be 128, 256 or 512")
        no_context(call.params, "")
        key = await self._key(snapshot, call)
        version = await self._encryption_version(key, call.params, "")
        material = await asyncio.to_thread(self._hsm.random, bits // 8)
        sealed = await self._crypto.seal_with_aad(
            snapshot,
            call.principal,
            key.id,
            material,
            lambda _: b"",
            version=version,
            operation=Operation.GENERATE_DATA_KEY,
        )
        call.used(key, sealed.key_version)
        answer = {
            "ciphertext": codec.tagged(sealed.key_version, sealed.iv + sealed.ciphertext + sealed.tag),
            "key_version": sealed.key_version,
        }
        if kind == "plaintext":
            answer["plaintext"] = codec.encoded(material)
        return answer

    # -- MACs and signatures --------------------------------------------------------------
    async def random(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``random(/<source>)(/<bytes>)``: 1 to 1,024 bytes from the HSM's generator, base64 or hex."""
        codec.only(call.params, {"bytes", "format", "source"})
        parts = (call.route.argument or "").split("/") if call.route.argument else []
        if parts and parts[0] in ("platform", "seal", "all"):
            parts = parts[1:]
        if len(parts) > 1 or (parts and not parts[0].isdigit()):
            raise invalid("random: the path is random(/<source>)(/<bytes>), source platform, seal or all")
        count = int(parts[0]) if parts else codec.number(call.params, "bytes", low=1, high=1024) or 32
        if not 1 <= count <= 1024:
            raise invalid("bytes: must be between 1 and 1024")
        output = _format(call.params, "base64")
        data = await asyncio.to_thread(self._hsm.random, count)
        return {"random_bytes": data.hex() if output == "hex" else codec.encoded(data)}

    async def hash(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``hash(/<algorithm>)``: the digest of the input, computed in software (no key), hex or base64."""
        codec.only(call.params, {"input", "algorithm", "format"})
        name = hash_name(call, "algorithm")
        if name not in codec.SOFTWARE_HASHES:
            raise invalid(f"unsupported hash algorithm {name}")
        data = codec.decoded(call.params, "input", limit=1 << 26)
        digest = hashlib.new(codec.SOFTWARE_HASHES[name], data).digest()
        return {"sum": digest.hex() if _format(call.params, "hex") == "hex" else codec.encoded(digest)}


def message_of(error: KeyManagerError) -> str:
    """Vault's words for a refusal of the services in a Transit answer."""
    if isinstance(error, DecryptionFailed):
        return DECRYPTION_FAILED
    if isinstance(error, VersionBelowMinimum):
        return TOO_OLD
    return error.message


def _message(error: BaseException) -> str:
    if isinstance(error, codec.TransitError):
        return error.message
    assert isinstance(error, KeyManagerError)
    return message_of(error)


def _batch(value: Any, limit: int) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(one, dict) for one in value):
        raise invalid("batch_input: expected a list of objects")
    if not value:
        raise invalid("missing batch input to process")
    if len(value) > limit:
        raise invalid(f"batch_input: at most {limit} items")
    return value


def _ciphertext(key: Key, params: Mapping[str, Any], where: str) -> tuple[int, bytes]:
    """The version and body of an item's ``ciphertext`` (the version checked against the key as read)."""
    if params.get("nonce"):
        raise invalid(f"{where}nonce: provided nonce not allowed for this key (no nonce is the caller's)")
    no_context(params, where)
    if not codec.text(params, "ciphertext", where=where):
        raise invalid(f"{where}ciphertext: missing ciphertext to decrypt")
    version, body = codec.untagged(codec.text(params, "ciphertext", where=where), "ciphertext")
    if version > key.primary_version:
        raise invalid(f"{where}ciphertext: invalid ciphertext: version is too new")
    if version < key.min_decryption_version:
        raise invalid(f"{where}ciphertext: {TOO_OLD}")
    if body is None:
        raise DecryptionFailed()
    return version, body


def _aad(params: Mapping[str, Any], where: str) -> bytes:
    if params.get("nonce"):
        raise invalid(f"{where}nonce: provided nonce not allowed for this key (no nonce is the caller's)")
    no_context(params, where)
    return codec.decoded(params, "associated_data", limit=1 << 20, where=where)


def no_context(params: Mapping[str, Any], where: str) -> None:
    if codec.text(params, "context", where=where):
        raise invalid(f"{where}context: the key is not derived (derived keys are not served): send no context")


def _format(params: Mapping[str, Any], default: str) -> str:
    output = codec.text(params, "format", default)
    if output not in ("hex", "base64"):
        raise invalid(f"format: unsupported encoding format {output}; must be hex or base64")
    return output


def hash_name(call: TransitCall, *fields: str) -> str:
    """The hash named by the path's last part, else the body's ``fields`` (Vault's default: sha2-256)."""
    if call.route.argument:
        return call.route.argument
    for name in fields:
        if call.params.get(name):
            return codec.text(call.params, name)
    return codec.DEFAULT_HASH
