"""Asymmetric keys: public keys, signatures, RSAES-OAEP, ECDH key agreement and data key pairs.

Each route translates base64 bodies into one call of
:class:`~keymanager.services.asymmetric.AsymmetricService` and its answer back; the rules (usage,
algorithms of the key's spec, message and digest lengths, the HSM's mechanisms) are the service's.
RSAES-OAEP shares ``/encrypt`` and ``/decrypt`` with the symmetric keys: a body naming an
``algorithm`` is answered by :func:`encrypt_public` / :func:`decrypt_private`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from keymanager.api.audit_trail import AuditContext, audited
from keymanager.api.deps import AuditDep, run_authenticated, services_of
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES, decode_base64, encode_base64
from keymanager.api.schemas.asymmetric import (
    DataKeyPairRequest,
    DataKeyPairResponse,
    DeriveSharedSecretRequest,
    DeriveSharedSecretResponse,
    PublicKeyResponse,
    SignRequest,
    SignResponse,
    VerifyRequest,
    VerifyResponse,
)
from keymanager.api.schemas.crypto import DecryptRequest, EncryptRequest
from keymanager.domain.key_specs import EncryptionAlgorithm
from keymanager.errors import DecryptionFailed, InvalidRequest

router = APIRouter(prefix="/v1", tags=["asymmetric keys"], responses=ERROR_RESPONSES, route_class=StrictJsonRoute)


@router.get("/keys/{key}/public-key", response_model=PublicKeyResponse, response_model_exclude_none=True)
@audited("key.public_key")
async def public_key(key: str, request: Request, trail: AuditDep) -> JSONResponse:
    """The public key of an asymmetric key (base64 DER SubjectPublicKeyInfo and PEM) and the
    algorithms it allows (right ``get_public_key``)."""
    asymmetric = services_of(request).asymmetric
    info = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: asymmetric.public_key(snapshot, principal, key),
        trail.success,
    )
    answer: dict[str, Any] = {
        "key_id": info.key_id,
        "algorithm": info.key.algorithm.value,
        "usage": info.usage.value,
        "public_key": encode_base64(info.spki_der),
        "public_key_pem": info.pem,
    }
    for name in ("signing_algorithms", "encryption_algorithms", "key_agreement_algorithms"):
        if getattr(info, name):
            answer[name] = list(getattr(info, name))
    return JSONResponse(answer)


@router.post("/keys/{key}/sign", response_model=SignResponse)
@audited("key.sign")
async def sign(key: str, body: SignRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Sign ``message`` (RAW ≤ 4,096 bytes, or a DIGEST as long as the algorithm's hash) with the
    key's private key in the HSM (right ``sign``)."""
    asymmetric = services_of(request).asymmetric
    message = decode_base64(body.message, "message")
    trail.details.update(algorithm=body.algorithm.value, message_type=body.message_type.value)
    signed = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: asymmetric.sign(
            snapshot, principal, key, message, body.message_type, body.algorithm
        ),
        trail.success,
    )
    return JSONResponse(
        {"signature": encode_base64(signed.signature), "key_id": signed.key_id, "algorithm": signed.algorithm.value}
    )


@router.post("/keys/{key}/verify", response_model=VerifyResponse)
@audited("key.verify")
async def verify(key: str, body: VerifyRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Whether ``signature`` is the key's ``algorithm`` signature of ``message`` (right ``verify``);
    a bad signature answers ``valid: false``."""
    asymmetric = services_of(request).asymmetric
    message, signature = decode_base64(body.message, "message"), decode_base64(body.signature, "signature")
    trail.details.update(algorithm=body.algorithm.value, message_type=body.message_type.value)
    checked = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: asymmetric.verify(
            snapshot, principal, key, message, body.message_type, signature, body.algorithm
        ),
        lambda c: trail.success(c, valid=c.valid),
    )
    return JSONResponse({"valid": checked.valid, "key_id": checked.key_id, "algorithm": checked.algorithm.value})


@router.post("/keys/{key}/derive-shared-secret", response_model=DeriveSharedSecretResponse)
@audited("key.derive_shared_secret")
async def derive_shared_secret(
    key: str, body: DeriveSharedSecretRequest, request: Request, trail: AuditDep
) -> JSONResponse:
    """The ECDH shared secret of the key's private key (in the HSM) and the peer's public key (base64
    DER SubjectPublicKeyInfo on the key's curve; right ``derive_shared_secret``)."""
    asymmetric = services_of(request).asymmetric
    peer = decode_base64(body.public_key, "public_key")
    trail.details.update(algorithm=body.algorithm.value)
    derived = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: asymmetric.derive_shared_secret(snapshot, principal, key, peer, body.algorithm),
        trail.success,
    )
    return JSONResponse(
        {
            "shared_secret": encode_base64(derived.shared_secret),
            "key_id": derived.key_id,
            "algorithm": derived.algorithm.value,
        }
    )


@router.post("/keys/{key}/datakey-pair", response_model=DataKeyPairResponse, response_model_exclude_none=True)
@audited("key.datakey_pair")
async def generate_data_key_pair(key: str, body: DataKeyPairRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """A new key pair of ``key_pair_spec``: its public key, its private key (PKCS#8 DER) as a ``km:1``
    ciphertext under this symmetric key (``/decrypt`` with the same context opens it), and the private
    key in plaintext unless declined (right ``generate_data_key_pair``)."""
    asymmetric = services_of(request).asymmetric
    trail.details.update(key_pair_spec=body.key_pair_spec.value)
    made = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: asymmetric.generate_data_key_pair(
            snapshot, principal, key, body.key_pair_spec, body.context, body.include_plaintext
        ),
        trail.success,
    )
    answer: dict[str, Any] = {
        "key_id": made.key_id,
        "key_pair_spec": made.key_pair_spec.value,
        "public_key": encode_base64(made.public_key),
        "private_key_ciphertext": made.private_key_ciphertext.ciphertext,
    }
    if made.private_key_plaintext is not None:
        answer["private_key_plaintext"] = encode_base64(made.private_key_plaintext)
    return JSONResponse(answer)


async def encrypt_public(
    key: str, body: EncryptRequest, algorithm: EncryptionAlgorithm, request: Request, trail: AuditContext
) -> JSONResponse:
    """``/encrypt`` of an RSA key: the raw RSAES-OAEP ciphertext under its public key (no context)."""
    asymmetric = services_of(request).asymmetric
    plaintext = body.plaintext_bytes()
    trail.details.update(algorithm=algorithm.value)
    if body.context:
        raise InvalidRequest("an RSA key takes no context (as AWS: no encryption context for asymmetric keys)")
    sealed = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: asymmetric.encrypt(snapshot, principal, key, plaintext, algorithm),
        trail.success,
    )
    return JSONResponse(
        {"ciphertext": encode_base64(sealed.ciphertext), "key_id": sealed.key_id, "algorithm": sealed.algorithm.value}
    )


async def decrypt_private(
    key: str, body: DecryptRequest, algorithm: EncryptionAlgorithm, request: Request, trail: AuditContext
) -> JSONResponse:
    """``/decrypt`` of an RSA key: the plaintext of a raw RSAES-OAEP ciphertext, decrypted in the HSM;
    every bad ciphertext (bad base64 included) is the one ``decryption_failed``."""
    asymmetric = services_of(request).asymmetric
    trail.details.update(algorithm=algorithm.value)
    if body.context:
        raise InvalidRequest("an RSA key takes no context (as AWS: no encryption context for asymmetric keys)")
    try:
        ciphertext = decode_base64(body.ciphertext, "ciphertext")
    except InvalidRequest:
        raise DecryptionFailed() from None
    opened = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: asymmetric.decrypt(snapshot, principal, key, ciphertext, algorithm),
        trail.success,
    )
    return JSONResponse({"plaintext": encode_base64(opened.plaintext)})
