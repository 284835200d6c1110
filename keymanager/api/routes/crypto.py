"""Encryption and decryption of small fields with keys that stay in the HSM."""

from __future__ import annotations

from fastapi import APIRouter

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AuditDep, CurrentPrincipal, ServicesDep
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
@audited("key.encrypt")
def encrypt(
    key: str, body: EncryptRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep
) -> EncryptResponse:
    """Encrypt base64 ``plaintext`` (≤ 64 KiB by default) under the key's primary version."""
    trail.details["key"] = key
    result = svc.crypto.encrypt(principal, key, body.plaintext_bytes(), body.context)
    trail.key_id, trail.key_version = result.key_id, result.key_version
    return EncryptResponse(ciphertext=result.ciphertext, key_id=result.key_id, key_version=result.key_version)


@router.post("/keys/{key}/decrypt", response_model=DecryptResponse)
@audited("key.decrypt")
def decrypt_with_key(
    key: str, body: DecryptRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep
) -> DecryptResponse:
    """Decrypt a ciphertext made with this key. Every cryptographic failure is 400 ``decryption_failed``."""
    trail.details["key"] = key
    result = svc.crypto.decrypt(principal, body.ciphertext, body.context, ref=key)
    trail.key_id, trail.key_version = result.key_id, result.key_version
    return DecryptResponse(plaintext=encode_base64(result.plaintext))


@router.post("/decrypt", response_model=DecryptResponse)
@audited("key.decrypt")
def decrypt(body: DecryptRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep) -> DecryptResponse:
    """Decrypt a ciphertext with the key it names. Every cryptographic failure is 400 ``decryption_failed``."""
    result = svc.crypto.decrypt(principal, body.ciphertext, body.context)
    trail.key_id, trail.key_version = result.key_id, result.key_version
    return DecryptResponse(plaintext=encode_base64(result.plaintext))
