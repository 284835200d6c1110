"""Transit's MACs and signatures (``hmac``, ``sign``, ``verify``) as calls of ``CryptoService`` and
``AsymmetricService``: HMACs ``vault:v<N>:`` and the HMAC of the input alone, computed in the HSM with the
hash of the key's spec; signatures ``vault:v1:`` (an asymmetric key has one version) and the signature
made in the HSM (ECDSA: ASN.1 DER, or JWS's r‖s in URL-safe base64), with the table's signing algorithm
for Vault's ``hash_algorithm``, ``signature_algorithm`` and ``prehashed``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

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
from keymanager.doors.transit import codec
from keymanager.doors.transit.codec import invalid
from keymanager.doors.transit.crypto import _COMMON, Operations, hash_name, no_context
from keymanager.doors.transit.keys import TransitCall, transit_spec
from keymanager.services.snapshot import Snapshot

_SIGN = _COMMON | {"input", "key_version", "hash_algorithm", "context", "prehashed", "signature_algorithm"}
_SIGN |= {"marshaling_algorithm", "salt_length", "reference"}
_VERIFY = _SIGN | {"signature", "hmac", "cmac", "algorithm"}
_HMAC = _COMMON | {"input", "key_version", "algorithm", "reference"}
RSA_SCHEMES = {"pss": "RSASSA_PSS_", "pkcs1v15": "RSASSA_PKCS1_V1_5_"}
"""Vault's ``signature_algorithm`` names, as the prefix of the table's RSA signing algorithms."""


class TransitSigning(Operations):
    """``hmac``, ``sign`` and ``verify`` (see the module docstring)."""

    async def hmac(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """``hmac/<name>(/<algorithm>)``: the HMAC of each input, in the HSM, under the key's hash."""
        codec.only(call.params, _HMAC)
        key = await self._key(snapshot, call)
        _mac_hash(key, hash_name(call, "algorithm"))

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
            no_context(params, where)
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
            _mac_hash(key, hash_name(call, "algorithm", "hash_algorithm"))
            return await self._each(call, "input", lambda p, w: self._verify_hmac(snapshot, call, key, p, w))
        algorithm, message_type, jws = _signing(key, call)

        async def item(params: Mapping[str, Any], where: str) -> dict[str, Any]:
            data = codec.decoded(params, "input", limit=1 << 26, where=where)
            no_context(params, where)
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


def _any_has(params: Mapping[str, Any], name: str) -> bool:
    batch = params.get("batch_input")
    return isinstance(batch, list) and any(isinstance(one, dict) and name in one for one in batch)


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
    name = hash_name(call, "hash_algorithm")
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
