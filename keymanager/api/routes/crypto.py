"""Encryption, decryption, data keys, re-encryption and batches with keys that stay in the HSM."""

from __future__ import annotations

from fastapi import APIRouter

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AuditDep, CurrentPrincipal, ServicesDep
from keymanager.api.schemas import (
    ERROR_RESPONSES,
    DataKeyRequest,
    DataKeyResponse,
    DecryptBatchRequest,
    DecryptBatchResponse,
    DecryptRequest,
    DecryptResponse,
    EncryptBatchRequest,
    EncryptBatchResponse,
    EncryptRequest,
    EncryptResponse,
    ErrorDetail,
    ItemError,
    ReencryptRequest,
    decode_base64,
    encode_base64,
)
from keymanager.errors import KeyManagerError
from keymanager.services.crypto import Decrypted, Encrypted

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


@router.post("/keys/{key}/datakey", response_model=DataKeyResponse, response_model_exclude_none=True)
@audited("key.generate_data_key")
def generate_data_key(
    key: str, body: DataKeyRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep
) -> DataKeyResponse:
    """A data key from the HSM's generator: its plaintext (unless declined) and its ciphertext under the key."""
    trail.details.update(key=key, bits=body.bits)
    data_key = svc.crypto.generate_data_key(principal, key, body.bits, body.context)
    encrypted = data_key.encrypted
    trail.key_id, trail.key_version = encrypted.key_id, encrypted.key_version
    return DataKeyResponse(
        plaintext=encode_base64(data_key.plaintext) if body.include_plaintext else None,
        ciphertext=encrypted.ciphertext,
        key_id=encrypted.key_id,
        key_version=encrypted.key_version,
    )


@router.post("/keys/{key}/reencrypt", response_model=EncryptResponse)
@audited("key.reencrypt")
def reencrypt(
    key: str, body: ReencryptRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep
) -> EncryptResponse:
    """Re-encrypt a ciphertext of this key under its primary version, or under ``destination_key``."""
    trail.details.update(key=key, destination_key=body.destination_key)
    result = svc.crypto.reencrypt(
        principal,
        key,
        body.ciphertext,
        body.context,
        destination=body.destination_key,
        destination_context=body.destination_context,
    )
    trail.key_id, trail.key_version = result.key_id, result.key_version
    return EncryptResponse(ciphertext=result.ciphertext, key_id=result.key_id, key_version=result.key_version)


@router.post("/keys/{key}/encrypt/batch", response_model=EncryptBatchResponse)
@audited("key.encrypt_batch")
def encrypt_batch(
    key: str, body: EncryptBatchRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep
) -> EncryptBatchResponse:
    """Encrypt up to 1,000 items: one result or one error per item, in order."""
    trail.details.update(key=key, items=len(body.items))
    items = [(_decoded(item.plaintext), item.context) for item in body.items]
    batch = svc.crypto.encrypt_batch(principal, key, items)
    trail.key_id = batch.key_id
    trail.details["failed"] = batch.failed
    return EncryptBatchResponse(results=[_encrypt_result(r) for r in batch.results])


@router.post("/keys/{key}/decrypt/batch", response_model=DecryptBatchResponse)
@audited("key.decrypt_batch")
def decrypt_batch(
    key: str, body: DecryptBatchRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep
) -> DecryptBatchResponse:
    """Decrypt up to 1,000 items with this key: one result or one error per item, in order."""
    trail.details.update(key=key, items=len(body.items))
    batch = svc.crypto.decrypt_batch(principal, key, [(item.ciphertext, item.context) for item in body.items])
    trail.key_id = batch.key_id
    trail.details["failed"] = batch.failed
    return DecryptBatchResponse(results=[_decrypt_result(r) for r in batch.results])


def _decoded(value: str) -> bytes | KeyManagerError:
    try:
        return decode_base64(value, "plaintext")
    except KeyManagerError as exc:
        return exc


def _item_error(error: KeyManagerError) -> ItemError:
    return ItemError(error=ErrorDetail(code=error.code, message=error.message))


def _encrypt_result(result: Encrypted | Decrypted | KeyManagerError) -> EncryptResponse | ItemError:
    if isinstance(result, Encrypted):
        return EncryptResponse(ciphertext=result.ciphertext, key_id=result.key_id, key_version=result.key_version)
    return _item_error(result if isinstance(result, KeyManagerError) else KeyManagerError())


def _decrypt_result(result: Encrypted | Decrypted | KeyManagerError) -> DecryptResponse | ItemError:
    if isinstance(result, Decrypted):
        return DecryptResponse(plaintext=encode_base64(result.plaintext))
    return _item_error(result if isinstance(result, KeyManagerError) else KeyManagerError())
