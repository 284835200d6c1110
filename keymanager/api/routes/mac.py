"""``/v1/keys/{key}/mac``: deterministic HMAC-SHA256 in the HSM, for blind indexes."""

from __future__ import annotations

import base64

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AuditDep, authenticate, services_of
from keymanager.api.schemas import (
    ERROR_RESPONSES,
    MacRequest,
    MacResponse,
    MacVerifyRequest,
    MacVerifyResponse,
    decode_base64,
)
from keymanager.domain.audit import AuditEntry
from keymanager.services.crypto import Mac, MacCheck
from keymanager.services.snapshot import Snapshot, run_validated

router = APIRouter(prefix="/v1/keys", tags=["mac"], responses=ERROR_RESPONSES)


@router.post("/{key}/mac", response_model=MacResponse)
@audited("key.mac")
async def mac(key: str, body: MacRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """The HMAC of ``data`` with the primary version of an HMAC key (``HMAC_SHA224``…``HMAC_SHA512``): equal
    inputs, equal MACs."""
    svc = services_of(request)
    trail.details["key"] = key
    data = decode_base64(body.data, "data")

    async def attempt(keys: Snapshot) -> Mac:
        principal = await authenticate(request, keys, trail)
        return await svc.crypto.mac(keys, principal, key, data, body.context)

    def entry(result: Mac) -> AuditEntry:
        trail.key_id, trail.key_version, trail.recorded = result.key_id, result.key_version, True
        return trail.entry("key.mac", 200)

    made = await run_validated(svc.cache, svc.audit, attempt, entry)
    return JSONResponse(
        {"mac": base64.b64encode(made.mac).decode(), "key_id": made.key_id, "key_version": made.key_version}
    )


@router.post("/{key}/mac/verify", response_model=MacVerifyResponse)
@audited("key.mac_verify")
async def verify_mac(key: str, body: MacVerifyRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Whether ``mac`` is the HMAC of ``data`` (compared in constant time)."""
    svc = services_of(request)
    trail.details["key"] = key
    data, mac = decode_base64(body.data, "data"), decode_base64(body.mac, "mac")

    async def attempt(keys: Snapshot) -> MacCheck:
        principal = await authenticate(request, keys, trail)
        return await svc.crypto.verify_mac(keys, principal, key, data, mac, body.context, body.key_version)

    def entry(check: MacCheck) -> AuditEntry:
        trail.key_id, trail.key_version, trail.recorded = check.key_id, check.key_version, True
        trail.details["valid"] = check.valid
        return trail.entry("key.mac_verify", 200)

    checked = await run_validated(svc.cache, svc.audit, attempt, entry)
    return JSONResponse({"valid": checked.valid})
