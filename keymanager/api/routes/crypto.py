"""Encryption, decryption, data keys, re-encryption, batches and MACs with keys that stay in the HSM."""

from __future__ import annotations

import binascii
from collections.abc import Awaitable, Callable, Sized
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from keymanager.api.audit_trail import AuditContext, audited
from keymanager.api.deps import AuditDep, run_authenticated, services_of
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.routes import asymmetric
from keymanager.api.schemas import ERROR_RESPONSES, decode_base64, encode_base64
from keymanager.api.schemas.crypto import (
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
    MacRequest,
    MacResponse,
    MacVerifyRequest,
    MacVerifyResponse,
    ReencryptRequest,
)
from keymanager.domain.audit import AuditEntry
from keymanager.domain.models import Principal
from keymanager.errors import InvalidRequest, KeyManagerError
from keymanager.services.crypto_results import BatchResults, Decrypted, Encrypted
from keymanager.services.snapshot import Snapshot

router = APIRouter(prefix="/v1", tags=["cryptography"], responses=ERROR_RESPONSES, route_class=StrictJsonRoute)


@router.post("/keys/{key}/encrypt", response_model=EncryptResponse)
@audited("key.encrypt")
async def encrypt(key: str, body: EncryptRequest, request: Request, trail: AuditDep) -> Response:
    """Encrypt base64 ``plaintext`` (≤ 64 KiB by default) under the key's primary version; with an
    ``algorithm`` (RSA keys), its raw RSAES-OAEP ciphertext under the key's public key."""
    if body.algorithm is not None:
        return await asymmetric.encrypt_public(key, body, body.algorithm, request, trail)
    crypto = services_of(request).crypto
    plaintext = body.plaintext_bytes()
    result = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: crypto.encrypt(snapshot, principal, key, plaintext, body.context),
        trail.success,
    )
    return _encrypted_answer(result)


@router.post("/keys/{key}/decrypt", response_model=DecryptResponse)
@audited("key.decrypt")
async def decrypt_with_key(key: str, body: DecryptRequest, request: Request, trail: AuditDep) -> Response:
    """Decrypt a ciphertext made with this key (with an ``algorithm``: a raw RSAES-OAEP ciphertext of an
    RSA key, decrypted in the HSM). Every cryptographic failure is 400 ``decryption_failed``."""
    if body.algorithm is not None:
        return await asymmetric.decrypt_private(key, body, body.algorithm, request, trail)
    return await _decrypt(request, body, trail, key)


@router.post("/decrypt", response_model=DecryptResponse)
@audited("key.decrypt")
async def decrypt(body: DecryptRequest, request: Request, trail: AuditDep) -> Response:
    """Decrypt a ciphertext with the key it names. Every cryptographic failure is 400 ``decryption_failed``."""
    if body.algorithm is not None:
        raise InvalidRequest("a raw RSAES-OAEP ciphertext names no key: use /v1/keys/{key}/decrypt")
    return await _decrypt(request, body, trail, None)


async def _decrypt(request: Request, body: DecryptRequest, trail: AuditContext, key: str | None) -> Response:
    crypto = services_of(request).crypto
    result = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: crypto.decrypt(snapshot, principal, body.ciphertext, body.context, ref=key),
        trail.success,
    )
    # What JSONResponse would write, without its encoder: base64 is ASCII that JSON does not escape.
    return Response(b'{"plaintext":"%s"}' % binascii.b2a_base64(result.plaintext, newline=False), media_type=_JSON)


@router.post("/keys/{key}/datakey", response_model=DataKeyResponse, response_model_exclude_none=True)
@audited("key.generate_data_key")
async def generate_data_key(key: str, body: DataKeyRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """A data key from the HSM's generator: its plaintext (unless declined) and its ciphertext under the key."""
    crypto = services_of(request).crypto
    trail.details.update(bits=body.bits)
    made = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: crypto.generate_data_key(snapshot, principal, key, body.bits, body.context),
        lambda d: trail.success(d.encrypted),
    )
    answer: dict[str, Any] = {"ciphertext": made.encrypted.ciphertext}
    if body.include_plaintext:
        answer["plaintext"] = encode_base64(made.plaintext)
    answer.update(key_id=made.encrypted.key_id, key_version=made.encrypted.key_version)
    return JSONResponse(answer)


@router.post("/keys/{key}/reencrypt", response_model=EncryptResponse)
@audited("key.reencrypt")
async def reencrypt(key: str, body: ReencryptRequest, request: Request, trail: AuditDep) -> Response:
    """Re-encrypt a ciphertext of this key under its primary version, or under ``destination_key``."""
    crypto = services_of(request).crypto
    trail.details.update(destination_key=body.destination_key)

    async def use(snapshot: Snapshot, principal: Principal) -> Encrypted:
        encrypted, _ = await crypto.reencrypt(
            snapshot,
            principal,
            body.ciphertext,
            body.context,
            ref=key,
            destination=body.destination_key,
            destination_context=body.destination_context,
        )
        return encrypted

    result = await run_authenticated(request, trail, use, trail.success)
    return _encrypted_answer(result)


@router.post("/keys/{key}/encrypt/batch", response_model=EncryptBatchResponse)
@audited("key.encrypt_batch")
async def encrypt_batch(key: str, body: EncryptBatchRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Encrypt up to 1,000 items: one result or one error per item, in order."""
    crypto = services_of(request).crypto
    items = [(_decoded(item.plaintext), item.context) for item in body.items]
    batch = await _batch(
        request, trail, items, lambda snapshot, principal: crypto.encrypt_batch(snapshot, principal, key, items)
    )
    return JSONResponse({"results": [_encrypt_result(r) for r in batch.results]})


@router.post("/keys/{key}/decrypt/batch", response_model=DecryptBatchResponse)
@audited("key.decrypt_batch")
async def decrypt_batch(key: str, body: DecryptBatchRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Decrypt up to 1,000 items with this key: one result or one error per item, in order."""
    items = [(item.ciphertext, item.context) for item in body.items]
    decrypt = services_of(request).crypto.decrypt_batch
    batch = await _batch(request, trail, items, lambda snapshot, principal: decrypt(snapshot, principal, key, items))
    return JSONResponse({"results": [_decrypt_result(r) for r in batch.results]})


@router.post("/keys/{key}/mac", response_model=MacResponse)
@audited("key.mac")
async def mac(key: str, body: MacRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """The HMAC of ``data`` with the primary version of an HMAC key (``HMAC_SHA224``…``HMAC_SHA512``): equal
    inputs, equal MACs (blind indexes)."""
    crypto = services_of(request).crypto
    data = decode_base64(body.data, "data")
    made = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: crypto.mac(snapshot, principal, key, data, body.context),
        trail.success,
    )
    return JSONResponse({"mac": encode_base64(made.mac), "key_id": made.key_id, "key_version": made.key_version})


@router.post("/keys/{key}/mac/verify", response_model=MacVerifyResponse)
@audited("key.mac_verify")
async def verify_mac(key: str, body: MacVerifyRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Whether ``mac`` is the HMAC of ``data`` (compared in constant time)."""
    crypto = services_of(request).crypto
    data, mac = decode_base64(body.data, "data"), decode_base64(body.mac, "mac")
    checked = await run_authenticated(
        request,
        trail,
        lambda snapshot, principal: crypto.verify_mac(
            snapshot, principal, key, data, mac, body.context, body.key_version
        ),
        lambda c: trail.success(c, valid=c.valid),
    )
    return JSONResponse({"valid": checked.valid})


_JSON = "application/json"


def _encrypted_answer(result: Encrypted) -> Response:
    """``{"ciphertext", "key_id", "key_version"}`` as JSONResponse would write it, without its encoder:
    a ciphertext string (``km:1:<hex>:<digits>:<base64>``) and a key id (hex) are ASCII that JSON
    does not escape."""
    return Response(
        b'{"ciphertext":"%s","key_id":"%s","key_version":%d}'
        % (result.ciphertext.encode(), result.key_id.encode(), result.key_version),
        media_type=_JSON,
    )


async def _batch(
    request: Request,
    trail: AuditContext,
    items: Sized,
    use: Callable[[Snapshot, Principal], Awaitable[BatchResults]],
) -> BatchResults:
    """``use`` run as a batch of ``items``: its record counts them and names how many failed."""
    trail.details.update(items=len(items))

    def success(batch: BatchResults) -> AuditEntry:
        trail.key_id = batch.key_id
        return trail.success(failed=batch.failed)

    return await run_authenticated(request, trail, use, success)


def _decoded(value: str) -> bytes | KeyManagerError:
    try:
        return decode_base64(value, "plaintext")
    except KeyManagerError as exc:
        return exc


def _item_error(error: KeyManagerError) -> dict[str, Any]:
    return {"error": {"code": error.code, "message": error.message}}


def _encrypt_result(result: Encrypted | Decrypted | KeyManagerError) -> dict[str, Any]:
    if isinstance(result, Encrypted):
        return {"ciphertext": result.ciphertext, "key_id": result.key_id, "key_version": result.key_version}
    return _item_error(result if isinstance(result, KeyManagerError) else KeyManagerError())


def _decrypt_result(result: Encrypted | Decrypted | KeyManagerError) -> dict[str, Any]:
    if isinstance(result, Decrypted):
        return {"plaintext": encode_base64(result.plaintext)}
    return _item_error(result if isinstance(result, KeyManagerError) else KeyManagerError())
