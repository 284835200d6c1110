"""``/v1/keys/{key}/mac``: deterministic HMAC-SHA256 in the HSM, for blind indexes."""

from __future__ import annotations

import base64

from fastapi import APIRouter

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AuditDep, CurrentPrincipal, ServicesDep
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
def mac(key: str, body: MacRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep) -> MacResponse:
    """HMAC-SHA256 of ``data`` with the primary version of an ``HMAC_SHA256`` key: equal inputs, equal MACs."""
    trail.details["key"] = key
    result = svc.crypto.mac(principal, key, decode_base64(body.data, "data"), body.context)
    trail.key_id, trail.key_version = result.key_id, result.key_version
    return MacResponse(mac=base64.b64encode(result.mac).decode(), key_id=result.key_id, key_version=result.key_version)


@router.post("/{key}/mac/verify", response_model=MacVerifyResponse)
@audited("key.mac_verify")
def verify_mac(
    key: str, body: MacVerifyRequest, principal: CurrentPrincipal, svc: ServicesDep, trail: AuditDep
) -> MacVerifyResponse:
    """Whether ``mac`` is the HMAC of ``data`` (compared in constant time)."""
    trail.details["key"] = key
    valid = svc.crypto.verify_mac(
        principal,
        key,
        decode_base64(body.data, "data"),
        decode_base64(body.mac, "mac"),
        body.context,
        body.key_version,
    )
    trail.details["valid"] = valid
    return MacVerifyResponse(valid=valid)
