"""``/v1/keys/{key}/mac``: deterministic HMAC-SHA256 in the HSM, for blind indexes."""

from __future__ import annotations

import base64

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AuditDep, run_authenticated, services_of
from keymanager.api.schemas import (
    ERROR_RESPONSES,
    MacRequest,
    MacResponse,
    MacVerifyRequest,
    MacVerifyResponse,
    decode_base64,
)

router = APIRouter(prefix="/v1/keys", tags=["mac"], responses=ERROR_RESPONSES)


@router.post("/{key}/mac", response_model=MacResponse)
@audited("key.mac")
async def mac(key: str, body: MacRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """The HMAC of ``data`` with the primary version of an HMAC key (``HMAC_SHA224``…``HMAC_SHA512``): equal
    inputs, equal MACs."""
    crypto = services_of(request).crypto
    data = decode_base64(body.data, "data")
    made = await run_authenticated(
        request, trail, lambda keys, principal: crypto.mac(keys, principal, key, data, body.context), trail.success
    )
    return JSONResponse(
        {"mac": base64.b64encode(made.mac).decode(), "key_id": made.key_id, "key_version": made.key_version}
    )


@router.post("/{key}/mac/verify", response_model=MacVerifyResponse)
@audited("key.mac_verify")
async def verify_mac(key: str, body: MacVerifyRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Whether ``mac`` is the HMAC of ``data`` (compared in constant time)."""
    crypto = services_of(request).crypto
    data, mac = decode_base64(body.data, "data"), decode_base64(body.mac, "mac")
    checked = await run_authenticated(
        request,
        trail,
        lambda keys, principal: crypto.verify_mac(keys, principal, key, data, mac, body.context, body.key_version),
        lambda c: trail.success(c, valid=c.valid),
    )
    return JSONResponse({"valid": checked.valid})
