"""``/v1/keys``: create, list, read and change keys."""

from __future__ import annotations

from fastapi import APIRouter

from keymanager.api.deps import Admin, CurrentPrincipal, ServicesDep
from keymanager.api.schemas import ERROR_RESPONSES, KeyCreate, KeyOut, KeyPatch

router = APIRouter(prefix="/v1/keys", tags=["keys"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=KeyOut)
def create_key(body: KeyCreate, admin: Admin, svc: ServicesDep) -> KeyOut:
    """Generate a key inside the HSM (version 1) and record it. 409 ``conflict`` if the name is taken."""
    key = svc.keys.create(
        body.name,
        algorithm=body.algorithm,
        description=body.description,
        policy=body.policy.to_policy(),
        rotation_period_days=body.rotation_period_days,
    )
    return KeyOut.of(key)


@router.get("", response_model=list[KeyOut])
def list_keys(principal: CurrentPrincipal, svc: ServicesDep) -> list[KeyOut]:
    """Every key for an admin; for others, the keys whose policy names them."""
    return [KeyOut.of(k) for k in svc.keys.list(principal)]


@router.get("/{key}", response_model=KeyOut)
def get_key(key: str, principal: CurrentPrincipal, svc: ServicesDep) -> KeyOut:
    """One key by name or id; 403 when its policy does not name a non-admin caller."""
    return KeyOut.of(svc.keys.get(key, principal))


@router.patch("/{key}", response_model=KeyOut)
def update_key(key: str, body: KeyPatch, admin: Admin, svc: ServicesDep) -> KeyOut:
    """Change the description, the policy (replaced whole), ``enabled`` or ``min_decryption_version``."""
    updated = svc.keys.update(
        key,
        description=body.description,
        policy=body.policy.to_policy() if body.policy is not None else None,
        enabled=body.enabled,
        min_decryption_version=body.min_decryption_version,
    )
    return KeyOut.of(updated)
