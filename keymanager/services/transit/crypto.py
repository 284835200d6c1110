"""Transit's operations on key material as calls of ``CryptoService`` and ``AsymmetricService``.

Ciphertexts are ``vault:v<N>:base64(nonce ‖ ciphertext ‖ tag)``: AES-GCM in the HSM under version N,
a nonce the HSM's side makes (never the caller's: ``nonce`` is refused), the caller's
``associated_data`` as the only AAD (``CryptoService.seal_with_aad``). Every failure of a ciphertext's
body (encoding, length, tag, another key's, other associated data) is the one
:data:`~keymanager.services.transit.codec.DECRYPTION_FAILED`; a version 0, beyond the latest or below
``min_decryption_version`` is read from the prefix and has its own message. Batches (``batch_input``,
at most the service's batch size) answer one result or ``error`` per item, in order, with Vault's
status: 400 when an item failed (the caller's ``partial_failure_response_code`` when others succeeded).
Signatures are ``vault:v1:`` and the signature (ECDSA: ASN.1 DER, or JWS's r‖s, URL-safe); HMACs
``vault:v<N>:`` and the HMAC of the input alone. ``hash`` is computed in software, as Vault does.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from keymanager.db.transit import TransitStore
from keymanager.domain import public_keys
from keymanager.domain.key_specs import (
    MAC_HASHES,
    SIGNING_HASHES,
    KeyUsage,
    MacAlgorithm,
    MessageType,
    SigningAlgorithm,
    spec_of,
)
from keymanager.domain.models import Key
from keymanager.domain.policy import Operation
from keymanager.errors import DecryptionFailed, InvalidRequest, KeyManagerError, PayloadTooLarge, VersionBelowMinimum
from keymanager.hsm import Hsm
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.crypto import CryptoService
from keymanager.services.snapshot import Snapshot
from keymanager.services.transit import codec
from keymanager.services.transit.codec import DECRYPTION_FAILED, TOO_OLD, invalid
from keymanager.services.transit.keys import TransitCall, transit_spec

_COMMON = frozenset({"name", "batch_input", "partial_failure_response_code"})
_ENCRYPT = _COMMON | {"plaintext", "context", "nonce", "key_version", "associated_data", "reference"}
_ENCRYPT |= {"type", "convergent_encryption", "padding_scheme"}
_DECRYPT = _COMMON | {"ciphertext", "context", "nonce", "associated_data", "reference", "padding_scheme"}
_REWRAP = _DECRYPT | {"key_version", "encrypt_padding_scheme", "decrypt_padding_scheme"}
_SIGN = _COMMON | {"input", "key_version", "hash_algorithm", "context", "prehashed", "signature_algorithm"}
_SIGN |= {"marshaling_algorithm", "salt_length", "reference"}
_VERIFY = _SIGN | {"signature", "hmac", "cmac", "algorithm"}
_HMAC = _COMMON | {"input", "key_version", "algorithm", "reference"}
_ITEM_ERRORS = (InvalidRequest, DecryptionFailed, VersionBelowMinimum, PayloadTooLarge, codec.TransitError)
"""What fails one item of a batch; any other error (the key's state, policy, the HSM) fails the request."""
RSA_SCHEMES = {"pss": "RSASSA_PSS_", "pkcs1v15": "RSASSA_PKCS1_V1_5_"}
"""Vault's ``signature_algorithm`` names, as the prefix of the table's RSA signing algorithms."""


class TransitCrypto:
    """The operations on key material (see the module docstring)."""

    def __init__(
        self, crypto: CryptoService, asymmetric: AsymmetricService, store: TransitStore, hsm: Hsm, *, max_batch: int
    ) -> None:
        self._crypto = crypto
        self._asymmetric = asymmetric
        self._store = store
        self._hsm = hsm
        self._max_batch = max_batch

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
        _no_context(call.params, "")
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
    async def hmac(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``hmac/<name>(/<algorithm>)``: the HMAC of each input, in the HSM, under the key's hash."""
        codec.only(call.params, _HMAC)
        key = await self._key(snapshot, call)
        _mac_hash(key, _hash_name(call, "algorithm"))

        async def item(params: Mapping[str, Any], where: str) -> dict[str, Any]:
            data = codec.decoded(params, "input", limit=1 << 26, where=where)
            version = await self._encryption_version(key, params, where)
            made = await self._crypto.mac(snapshot, call.principal, key.id, data, framed=False, version=version)
            call.used(key, made.key_version)
            return {"hmac": codec.tagged(made.key_version, made.mac), "key_version": made.key_version}

        return await self._each(call, "input", item)

    async def sign(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``sign/<name>(/<hash_algorithm>)``: the signature of each input, made in the HSM."""
        codec.only(call.params, _SIGN)
        key = await self._key(snapshot, call)
        algorithm, message_type, jws = _signing(key, call)

        async def item(params: Mapping[str, Any], where: str) -> dict[str, Any]:
            data = codec.decoded(params, "input", limit=1 << 26, where=where)
            _no_context(params, where)
            if (codec.number(params, "key_version", where=where) or 1) != 1:
                raise invalid(f"{where}key_version: an asymmetric key has one version, 1")
            signed = await self._asymmetric.sign(snapshot, call.principal, key.id, data, message_type, algorithm)
            call.used(key, signed.key_version)
            signature = signed.signature
            if jws:
                signature = public_keys.ecdsa_raw(signature, _curve_bits(key))
            return {"signature": codec.tagged(1, signature, urlsafe=jws), "key_version": 1}

        return await self._each(call, "input", item)

    async def verify(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``verify/<name>(/<hash_algorithm>)``: whether each ``signature`` (or ``hmac``) is valid."""
        codec.only(call.params, _VERIFY)
        key = await self._key(snapshot, call)
        if "hmac" in call.params or (call.params.get("batch_input") and _any_has(call.params, "hmac")):
            _mac_hash(key, _hash_name(call, "algorithm", "hash_algorithm"))
            return await self._each(call, "input", lambda p, w: self._verify_hmac(snapshot, call, key, p, w))
        algorithm, message_type, jws = _signing(key, call)

        async def item(params: Mapping[str, Any], where: str) -> dict[str, Any]:
            data = codec.decoded(params, "input", limit=1 << 26, where=where)
            _no_context(params, where)
            version, signature = codec.untagged(codec.text(params, "signature", where=where), "signature", urlsafe=jws)
            if version != 1:
                raise invalid(f"{where}signature: an asymmetric key has one version, 1")
            if signature is None:
                return {"valid": False}
            if jws:
                signature = public_keys.ecdsa_der(signature)
            checked = await self._asymmetric.verify(
                snapshot, call.principal, key.id, data, message_type, signature, algorithm
            )
            call.used(key, 1)
            return {"valid": checked.valid}

        return await self._each(call, "input", item)

    async def _verify_hmac(
        self, snapshot: Snapshot, call: TransitCall, key: Key, params: Mapping[str, Any], where: str
    ) -> dict[str, Any]:
        data = codec.decoded(params, "input", limit=1 << 26, where=where)
        version, mac = codec.untagged(codec.text(params, "hmac", where=where), "hmac")
        if version > key.primary_version:
            raise invalid(f"{where}hmac: invalid version")
        if mac is None:
            return {"valid": False}
        checked = await self._crypto.verify_mac(
            snapshot, call.principal, key.id, data, mac, version=version, framed=False
        )
        call.used(key, checked.key_version)
        return {"valid": checked.valid}

    # -- without a key -------------------------------------------------------------------
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
        name = _hash_name(call, "algorithm")
        if name not in codec.SOFTWARE_HASHES:
            raise invalid(f"unsupported hash algorithm {name}")
        data = codec.decoded(call.params, "input", limit=1 << 26)
        digest = hashlib.new(codec.SOFTWARE_HASHES[name], data).digest()
        return {"sum": digest.hex() if _format(call.params, "hex") == "hex" else codec.encoded(digest)}

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


def _any_has(params: Mapping[str, Any], name: str) -> bool:
    batch = params.get("batch_input")
    return isinstance(batch, list) and any(isinstance(one, dict) and name in one for one in batch)


def _ciphertext(key: Key, params: Mapping[str, Any], where: str) -> tuple[int, bytes]:
    """The version and body of an item's ``ciphertext`` (the version checked against the key as read)."""
    if params.get("nonce"):
        raise invalid(f"{where}nonce: provided nonce not allowed for this key (no nonce is the caller's)")
    _no_context(params, where)
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
    _no_context(params, where)
    return codec.decoded(params, "associated_data", limit=1 << 20, where=where)


def _no_context(params: Mapping[str, Any], where: str) -> None:
    if codec.text(params, "context", where=where):
        raise invalid(f"{where}context: the key is not derived (derived keys are not served): send no context")


def _format(params: Mapping[str, Any], default: str) -> str:
    output = codec.text(params, "format", default)
    if output not in ("hex", "base64"):
        raise invalid(f"format: unsupported encoding format {output}; must be hex or base64")
    return output


def _hash_name(call: TransitCall, *fields: str) -> str:
    """The hash named by the path's last part, else the body's ``fields`` (Vault's default: sha2-256)."""
    if call.route.argument:
        return call.route.argument
    for name in fields:
        if call.params.get(name):
            return codec.text(call.params, name)
    return codec.DEFAULT_HASH


def _mac_hash(key: Key, name: str) -> None:
    """400 unless ``key`` is an HMAC key whose HMAC uses the hash Vault names ``name``."""
    spec = transit_spec(key)
    if KeyUsage.GENERATE_VERIFY_MAC not in spec.usages:
        raise invalid(f"a {spec.transit_type} key computes no HMAC here (an hmac key does)")
    ours = [MAC_HASHES[MacAlgorithm(a)] for a in spec.algorithms(KeyUsage.GENERATE_VERIFY_MAC)]
    if codec.HASHES.get(name) not in ours:
        allowed = ", ".join(n for n, h in codec.HASHES.items() if h in ours)
        raise invalid(f"algorithm: this hmac key computes HMAC with {allowed} (its spec {key.algorithm}), not {name}")


def _signing(key: Key, call: TransitCall) -> tuple[SigningAlgorithm, MessageType, bool]:
    """The table's signing algorithm for Vault's hash, scheme and marshaling; the message type; JWS or not."""
    spec = transit_spec(key)
    kind, params = spec.transit_type or "", call.params
    allowed = [SigningAlgorithm(a) for a in spec.algorithms(KeyUsage.SIGN_VERIFY)]
    if not allowed:
        raise invalid(f"a {kind} key does not sign here")
    prehashed = bool(codec.flag(params, "prehashed"))
    marshaling = codec.text(params, "marshaling_algorithm", "asn1")
    if marshaling not in ("asn1", "jws"):
        raise invalid(f"marshaling_algorithm: unsupported marshaling type {marshaling}")
    jws = marshaling == "jws" and kind.startswith("ecdsa")
    message_type = MessageType.DIGEST if prehashed else MessageType.RAW
    if kind == "ed25519":
        wanted = "ED25519_PH_SHA_512" if prehashed else "ED25519_SHA_512"
        return next(a for a in allowed if a.value == wanted), message_type, False
    name = _hash_name(call, "hash_algorithm")
    digest = codec.HASHES.get(name)
    prefix = RSA_SCHEMES.get(codec.text(params, "signature_algorithm", "pss"), "?") if kind.startswith("rsa") else ""
    if prefix == "?":
        raise invalid("signature_algorithm: must be pss or pkcs1v15")
    found = [a for a in allowed if SIGNING_HASHES[a] is digest and a.value.startswith(prefix)]
    if not found:
        hashes = ", ".join(n for n, h in codec.HASHES.items() if any(SIGNING_HASHES[a] is h for a in allowed))
        raise invalid(f"hash_algorithm: a {kind} key signs with {hashes} here, not {name}")
    _salt(params, found[0])
    return found[0], message_type, jws


def _salt(params: Mapping[str, Any], algorithm: SigningAlgorithm) -> None:
    """PSS signs with a salt as long as the digest: ``salt_length`` auto, hash or that length."""
    salt = codec.text(params, "salt_length", "auto")
    length = str(hashlib.new(SIGNING_HASHES[algorithm].value).digest_size)
    if salt not in ("auto", "hash", length) and algorithm.value.startswith("RSASSA_PSS"):
        raise invalid(f"salt_length: PSS here uses a salt as long as the digest ({length} bytes: auto or hash)")


def _curve_bits(key: Key) -> int:
    bits = spec_of(key.algorithm).curve_bits
    assert bits is not None
    return bits
