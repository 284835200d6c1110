"""CreateKeyPair, Sign, SignatureVerify and RSA-OAEP: KMIP's key pairs on the asymmetric keys of the services.

A KMIP key pair is one asymmetric key of ours (``services/asymmetric.py``, the table's RSA rows):
its private key's unique identifier is the key's id, its public key's the id followed by
:data:`PUBLIC_SUFFIX`. The pair shares one state: Activate or Revoke of either half changes both;
Destroy of the private key destroys the pair in the HSM, Destroy of the public key only retires that
identifier. Get of the public key answers it (X.509 SubjectPublicKeyInfo); Get of the private key is
refused like that of every non-exportable key. Sign with the private key, SignatureVerify with either
(RSASSA-PSS or PKCS#1 v1.5, SHA-256/384/512), Encrypt with the public key and Decrypt with the
private key (RSAES-OAEP with SHA-1 or SHA-256), each through ``AsymmetricService`` (policy, usage,
state, the HSM) and audited through ``run_validated``.
"""

from __future__ import annotations

import asyncio
import functools
import operator
import time
from collections.abc import Awaitable, Callable
from typing import Any

from keymanager.domain.credentials import new_id
from keymanager.domain.key_specs import (
    SIGNING_HASHES,
    EncryptionAlgorithm,
    HsmKeyType,
    KeyUsage,
    MessageType,
    SigningAlgorithm,
    choose_usage,
    spec_of,
)
from keymanager.domain.models import Algorithm, Key, KeyState, Lifecycle
from keymanager.domain.policy import Policy
from keymanager.doors.kmip import attributes as attrs
from keymanager.doors.kmip import spec
from keymanager.doors.kmip.calls import KmipCall
from keymanager.doors.kmip.crypto import visible_key
from keymanager.doors.kmip.keys import (
    KEY_TYPES,
    KMIP_NAME_PREFIX,
    KMIP_NAMES,
    KNOWN_ALGORITHMS,
    OWNER_USES,
    KmipKeys,
    kmip_type,
    revocation,
)
from keymanager.doors.kmip.refusals import NO_OBJECT, carried, invalid, wrong_state
from keymanager.doors.kmip.requests import (
    CipherRequest,
    CreateKeyPairRequest,
    DecryptResponse,
    EncryptResponse,
    GetRequest,
    Got,
    Identified,
    Named,
    PairCreated,
    Parameters,
    RevokeRequest,
    SignatureRequest,
    SignatureVerified,
    Signed,
)
from keymanager.errors import KeyDisabled, KeyNotFound
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.audit_log import AuditLog
from keymanager.services.key_creation import InitialFacts, NewKey
from keymanager.services.keys import KeyService, LifecycleChange
from keymanager.services.snapshot import MetadataCache, Snapshot, run_validated

PUBLIC_SUFFIX = "-public"
"""A key pair's public key: the key's id followed by this."""
A = spec.AttributeType
_SIGNING = {
    (spec.PaddingMethod.PSS, spec.HashingAlgorithm.SHA_256): SigningAlgorithm.RSASSA_PSS_SHA_256,
    (spec.PaddingMethod.PSS, spec.HashingAlgorithm.SHA_384): SigningAlgorithm.RSASSA_PSS_SHA_384,
    (spec.PaddingMethod.PSS, spec.HashingAlgorithm.SHA_512): SigningAlgorithm.RSASSA_PSS_SHA_512,
    (spec.PaddingMethod.PKCS1v15, spec.HashingAlgorithm.SHA_256): SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_256,
    (spec.PaddingMethod.PKCS1v15, spec.HashingAlgorithm.SHA_384): SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_384,
    (spec.PaddingMethod.PKCS1v15, spec.HashingAlgorithm.SHA_512): SigningAlgorithm.RSASSA_PKCS1_V1_5_SHA_512,
}
"""KMIP's padding and hash of an RSA signature, as the table's signing algorithms."""
_OAEP = {
    None: EncryptionAlgorithm.RSAES_OAEP_SHA_1,
    spec.HashingAlgorithm.SHA_1: EncryptionAlgorithm.RSAES_OAEP_SHA_1,
    spec.HashingAlgorithm.SHA_256: EncryptionAlgorithm.RSAES_OAEP_SHA_256,
}
"""KMIP's OAEP hash (none named: SHA-1, OAEP's default), as the table's encryption algorithms."""
_SIGN_BITS = spec.CryptographicUsageMask.SIGN.value | spec.CryptographicUsageMask.VERIFY.value


def split(uid: str) -> tuple[str, bool]:
    """The key a unique identifier names, and whether it names the pair's public key."""
    if uid.endswith(PUBLIC_SUFFIX):
        return uid.removesuffix(PUBLIC_SUFFIX), True
    return uid, False


class KmipPairs:
    """The key-pair operations of the KMIP door (see the module docstring)."""

    def __init__(
        self,
        keys: KeyService,
        kmip_keys: KmipKeys,
        asymmetric: AsymmetricService,
        cache: MetadataCache,
        audit: AuditLog,
    ) -> None:
        self._keys = keys
        self._kmip_keys = kmip_keys
        self._asymmetric = asymmetric
        self._cache = cache
        self._audit = audit

    async def create_key_pair(self, call: KmipCall, payload: CreateKeyPairRequest) -> PairCreated:
        """A new RSA key pair in the HSM, pre-active, owned by the caller; for signing unless its
        usage masks name only Encrypt/Decrypt."""
        templates = [
            payload.common,
            payload.private,
            payload.public,
        ]
        listed = [a for template in templates if template is not None for a in template.attributes]
        masks = [a for a in listed if a.name == A.CRYPTOGRAPHIC_USAGE_MASK.value]
        kept, server = attrs.client_attributes([a for a in listed if a not in masks])
        if masks:  # the halves' masks together: the pair's
            kept["usage_mask"] = functools.reduce(operator.or_, (int(attrs.parsed(a)[2]) for a in masks))
        algorithm = server.get(A.CRYPTOGRAPHIC_ALGORITHM.value)
        length = server.get(A.CRYPTOGRAPHIC_LENGTH.value)
        found = None
        if algorithm in KNOWN_ALGORITHMS and isinstance(length, int):
            found = KEY_TYPES.get((spec.CryptographicAlgorithm(algorithm), length))
        if found is None or not spec_of(found).asymmetric:
            offered = ", ".join(
                f"{kmip.name}-{bits}" for kind, (kmip, bits) in KMIP_NAMES.items() if spec_of(kind).asymmetric
            )
            raise invalid(f"CreateKeyPair makes the key pairs of the table of key types ({offered})")
        usage = _pair_usage(found, kept.get("usage_mask"), spec.CryptographicAlgorithm(algorithm))
        kept["owner"] = call.principal.id
        kept.setdefault("dates", {})[A.INITIAL_DATE.value] = int(time.time())
        policy = Policy(grants={operation: frozenset({call.principal.name}) for operation in OWNER_USES[usage]})
        created = await asyncio.to_thread(
            self._keys.create,
            NewKey(
                KMIP_NAME_PREFIX + new_id(),
                algorithm=found,
                usage=usage,
                description="key pair created through KMIP",
                policy=policy,
            ),
            record=call.success(),
            initial=InitialFacts(Lifecycle.PRE_ACTIVE, kept),
        )
        call.key_id, call.key_version = created.id, created.primary_version
        call.batch.id_placeholder = created.id
        return PairCreated(created.id, created.id + PUBLIC_SUFFIX)

    async def sign(self, call: KmipCall, payload: SignatureRequest) -> Signed:
        """The signature of the data with the pair's private key, in the HSM."""
        uid = call.uid(payload.unique_identifier)
        ref, public = split(uid)
        if public:
            raise invalid("Sign needs the private key of the pair")
        data = carried(payload.data)

        async def attempt(snapshot: Snapshot) -> bytes:
            key = await self._active(snapshot, call, ref)
            algorithm = _signing(payload.cryptographic_parameters, key.algorithm)
            signed = await self._asymmetric.sign(snapshot, call.principal, ref, data, MessageType.RAW, algorithm)
            call.key_version = signed.key_version
            return signed.signature

        signature = await self._used(call, attempt)
        return Signed(uid, signature)

    async def signature_verify(self, call: KmipCall, payload: SignatureRequest) -> SignatureVerified:
        """Whether the signature is the data's, under the pair's public key (Valid or Invalid)."""
        uid = call.uid(payload.unique_identifier)
        ref, _ = split(uid)
        data, signature = payload.data, payload.signature_data
        if data is None or signature is None:
            raise invalid("SignatureVerify needs the data and the signature")

        async def attempt(snapshot: Snapshot) -> bool:
            key = await self._active(snapshot, call, ref)
            algorithm = _signing(payload.cryptographic_parameters, key.algorithm)
            checked = await self._asymmetric.verify(
                snapshot, call.principal, ref, data, MessageType.RAW, signature, algorithm
            )
            call.key_version = checked.key_version
            return bool(checked.valid)

        valid = await self._used(call, attempt)
        return SignatureVerified(uid, valid)

    async def encrypt(self, call: KmipCall, payload: CipherRequest) -> EncryptResponse:
        """RSAES-OAEP of the data under the pair's public key."""
        uid = call.uid(payload.unique_identifier)
        ref, _ = split(uid)
        algorithm = _oaep(payload.cryptographic_parameters)
        data = carried(payload.data)

        async def attempt(snapshot: Snapshot) -> bytes:
            await self._active(snapshot, call, ref)
            sealed = await self._asymmetric.encrypt(snapshot, call.principal, ref, data, algorithm)
            call.key_version = sealed.key_version
            return sealed.ciphertext

        ciphertext = await self._used(call, attempt)
        return EncryptResponse(uid, data=ciphertext)

    async def decrypt(self, call: KmipCall, payload: CipherRequest) -> DecryptResponse:
        """The plaintext of an RSAES-OAEP ciphertext, decrypted in the HSM with the pair's private key."""
        uid = call.uid(payload.unique_identifier)
        ref, public = split(uid)
        if public:
            raise invalid("Decrypt needs the private key of the pair")
        algorithm = _oaep(payload.cryptographic_parameters)
        data = carried(payload.data)

        async def attempt(snapshot: Snapshot) -> bytes:
            await self._active(snapshot, call, ref)
            opened = await self._asymmetric.decrypt(snapshot, call.principal, ref, data, algorithm)
            call.key_version = opened.key_version
            return opened.plaintext

        plaintext = await self._used(call, attempt)
        return DecryptResponse(uid, data=plaintext)

    async def get_public(self, call: KmipCall, uid: str) -> Got:
        """The pair's public key (DER SubjectPublicKeyInfo, Key Format Type X.509)."""
        ref, _ = split(uid)
        key = await self._kmip_keys.key(call, ref)
        if key.state is KeyState.DESTROYED or key.attributes.get("public_destroyed"):
            raise KeyNotFound(NO_OBJECT)
        version = key.versions[key.primary_version]
        assert version.public_key is not None
        algorithm, length = kmip_type(key)
        return Got(spec.ObjectType.PUBLIC_KEY, uid, version.public_key, algorithm, length, spec.KeyFormatType.X_509)

    async def activate_public(self, call: KmipCall, payload: Named, ref: str, uid: str) -> Identified:
        """Activate the pair through its public key (nothing to do when the pair is active)."""
        key = await self._kmip_keys.managed(call, ref)
        if key.lifecycle_state is Lifecycle.PRE_ACTIVE:
            await self._kmip_keys.activate(call, payload, ref)
        elif key.lifecycle_state is not Lifecycle.ACTIVE:
            raise wrong_state(f"the key pair is {key.lifecycle_state.value.replace('_', '-')}: it cannot be activated")
        return Identified(uid)

    async def revoke_public(self, call: KmipCall, payload: RevokeRequest, ref: str, uid: str) -> Identified:
        """Revoke the pair through its public key (nothing to do when it was revoked already)."""
        key = await self._kmip_keys.managed(call, ref)
        if key.lifecycle_state in (Lifecycle.ACTIVE, Lifecycle.PRE_ACTIVE) or revocation(call, payload):
            await self._kmip_keys.revoke(call, payload, ref)
        return Identified(uid)

    async def destroy_public(self, call: KmipCall, payload: Named, ref: str, uid: str) -> Identified:
        """Retire the public key's identifier (the private key, in the HSM, stays until destroyed itself)."""
        key = await self._kmip_keys.managed(call, ref)
        if key.lifecycle_state is Lifecycle.ACTIVE:
            raise wrong_state("the key pair is active: revoke it before destroying it")
        if key.state is KeyState.DESTROYED or key.attributes.get("public_destroyed"):
            raise wrong_state("the object is destroyed already")
        change = LifecycleChange(attributes={**key.attributes, "public_destroyed": True})
        await asyncio.to_thread(self._keys.change_lifecycle, key, change, record=call.success(key.id))
        return Identified(uid)

    async def get_any(self, call: KmipCall, payload: GetRequest, ref: str, uid: str) -> Got:
        """Get through the public key's identifier."""
        return await self.get_public(call, uid)

    async def _active(self, snapshot: Snapshot, call: KmipCall, ref: str) -> Key:
        key = await visible_key(snapshot, call, ref)
        if key.lifecycle_state is not Lifecycle.ACTIVE:  # an error a stale cache may explain: read afresh
            raise KeyDisabled(f"the key is {key.lifecycle_state.value.replace('_', '-')}: only an active key is used")
        return key

    async def _used(self, call: KmipCall, attempt: Callable[[Snapshot], Awaitable[Any]]) -> Any:
        return await run_validated(self._cache, self._audit, attempt, lambda _: call.success())


_AGREEMENT_BITS = spec.CryptographicUsageMask.KEY_AGREEMENT.value | spec.CryptographicUsageMask.DERIVE_KEY.value
_CRYPT_BITS = spec.CryptographicUsageMask.ENCRYPT.value | spec.CryptographicUsageMask.DECRYPT.value


def _pair_usage(algorithm: Algorithm, mask: int | None, named: spec.CryptographicAlgorithm) -> KeyUsage:
    """The usage of a new pair: what its usage masks name (Sign/Verify; else Encrypt/Decrypt; else Key
    Agreement or Derive Key), none named: key agreement for a pair asked as ECDH, else signing; refused
    by name when the spec does not allow it (``domain/key_specs/``)."""
    if mask is None:
        usage = KeyUsage.KEY_AGREEMENT if named is spec.CryptographicAlgorithm.ECDH else KeyUsage.SIGN_VERIFY
    elif int(mask) & _SIGN_BITS:
        usage = KeyUsage.SIGN_VERIFY
    elif int(mask) & _CRYPT_BITS:
        usage = KeyUsage.ENCRYPT_DECRYPT
    elif int(mask) & _AGREEMENT_BITS:
        usage = KeyUsage.KEY_AGREEMENT
    else:
        raise invalid("a key pair's usage masks name Sign/Verify, Encrypt/Decrypt or Key Agreement/Derive Key")
    try:
        return choose_usage(algorithm, usage)
    except ValueError as refused:
        raise invalid(str(refused)) from None


def is_pair(key: Key) -> bool:
    """Whether ``key`` is a key pair (an asymmetric key)."""
    return (
        key.versions.get(key.primary_version) is not None and key.versions[key.primary_version].public_key is not None
    )


def _signing(parameters: Parameters | None, algorithm: Algorithm) -> SigningAlgorithm:
    """The signing algorithm of the table the Cryptographic Parameters name for a key of ``algorithm``:
    an RSA key's by padding and hash (none named: PSS with SHA-256); an EC or Ed25519 key's is its
    spec's first algorithm (ECDSA with the curve's hash, pure Ed25519), whose hash a client may name
    (refused by name when it names another)."""
    family, hashing = _named_signature(parameters)
    if spec_of(algorithm).key_type is HsmKeyType.RSA:
        return _rsa_signing(parameters, family, hashing)
    own = SigningAlgorithm(spec_of(algorithm).algorithms(KeyUsage.SIGN_VERIFY)[0])
    wanted = SIGNING_HASHES[own].value.upper().replace("SHA", "SHA_")
    ecdsa = spec_of(algorithm).key_type is HsmKeyType.EC
    if family not in ((None, "ECDSA") if ecdsa else (None,)) or (hashing is not None and hashing.name != wanted):
        asked = ", ".join(n for n in (family, getattr(hashing, "name", None)) if n is not None)
        raise invalid(f"an {algorithm.value} key signs with {own.value} only, not with {asked}")
    return own


def _named_signature(parameters: Parameters | None) -> tuple[str | None, spec.HashingAlgorithm | None]:
    """The signature family (``PSS``, ``PKCS1v15``, ``ECDSA``, or another Digital Signature Algorithm's
    name) and the hash the Cryptographic Parameters name, by Digital Signature Algorithm and by
    Hashing Algorithm; Invalid Field when the two name different hashes."""
    hashing = getattr(parameters, "hashing_algorithm", None)
    named = getattr(parameters, "digital_signature_algorithm", None)
    if named is None:
        return None, hashing
    family, _, digest = named.name.partition("_WITH_")  # ECDSA_WITH_SHA256, SHA256_WITH_RSA_ENCRYPTION
    if named is spec.DigitalSignatureAlgorithm.RSASSA_PSS:
        family, digest = "PSS", ""
    elif digest == "RSA_ENCRYPTION":
        family, digest = "PKCS1v15", family
    by_name = next((h for h in spec.HashingAlgorithm if h.name.replace("_", "") == digest.replace("_", "")), None)
    if digest and by_name is None:
        raise invalid(f"the digital signature algorithm {named.name} is not offered")
    if hashing is not None and by_name is not None and hashing is not by_name:
        raise invalid(f"the digital signature algorithm {named.name} and the hash {hashing.name} disagree")
    return family, by_name or hashing


def _rsa_signing(
    parameters: Parameters | None, family: str | None, hashing: spec.HashingAlgorithm | None
) -> SigningAlgorithm:
    paddings = {"PSS": spec.PaddingMethod.PSS, "PKCS1v15": spec.PaddingMethod.PKCS1v15}
    if family is not None and family not in paddings:
        raise invalid(f"an RSA key does not sign with {family}: PSS or PKCS#1 v1.5")
    padding = paddings.get(family or "") or getattr(parameters, "padding_method", None) or spec.PaddingMethod.PSS
    hashing = hashing or spec.HashingAlgorithm.SHA_256
    found = _SIGNING.get((padding, hashing))
    if found is None:
        raise invalid(
            f"RSA signatures are PSS or PKCS#1 v1.5 with SHA-256, SHA-384 or SHA-512, not {padding.name} {hashing.name}"
        )
    return found


def _oaep(parameters: Parameters | None) -> EncryptionAlgorithm:
    padding = getattr(parameters, "padding_method", None)
    if padding not in (None, spec.PaddingMethod.OAEP):
        raise invalid(f"an RSA key encrypts with OAEP padding only, not {padding.name}")
    hashing = getattr(parameters, "hashing_algorithm", None)
    found = _OAEP.get(hashing)
    if found is None:
        raise invalid(f"RSAES-OAEP is offered with SHA-1 or SHA-256, not {getattr(hashing, 'name', hashing)}")
    return found
