"""Encryption and decryption of small fields with keys that stay in the HSM."""

from __future__ import annotations

from fastapi import APIRouter

from keymanager.api.deps import CurrentPrincipal, ServicesDep
from keymanager.api.schemas import (
    ERROR_RESPONSES,
    DecryptRequest,
    DecryptResponse,
    EncryptRequest,
    EncryptResponse,
    encode_base64,
)

router = APIRouter(prefix="/v1", tags=["cryptography"], responses=ERROR_RESPONSES)


@router.post("/keys/{key}/encrypt", response_model=EncryptResponse)
def encrypt(key: str, body: EncryptRequest, principal: CurrentPrincipal, svc: ServicesDep) -> EncryptResponse:
    """Encrypt base64 ``plaintext`` (≤ 64 KiB by default) under the key's primary version."""
    result = svc.crypto.encrypt(principal, key, body.plaintext_bytes(), body.context)
    return EncryptResponse(ciphertext=result.ciphertext, key_id=result.key_id, key_version=result.key_version)


@router.post("/keys/{key}/decrypt", response_model=DecryptResponse)
def decrypt_with_key(key: str, body: DecryptRequest, principal: CurrentPrincipal, svc: ServicesDep) -> DecryptResponse:
    """Decrypt a ciphertext made with this key. Every cryptographic failure is 400 ``decryption_failed``."""
    plaintext = svc.crypto.decrypt(principal, body.ciphertext, body.context, ref=key)
    return DecryptResponse(plaintext=encode_base64(plaintext))


@router.post("/decrypt", response_model=DecryptResponse)
def decrypt(body: DecryptRequest, principal: CurrentPrincipal, svc: ServicesDep) -> DecryptResponse:
    """Decrypt a ciphertext with the key it names. Every cryptographic failure is 400 ``decryption_failed``."""
    plaintext = svc.crypto.decrypt(principal, body.ciphertext, body.context)
    return DecryptResponse(plaintext=encode_base64(plaintext))
