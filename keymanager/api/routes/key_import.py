"""``/v1/keys/{key}/import-parameters`` and ``…/import``: bring your own key (AWS KMS's import, in REST).

Admins only. The material is wrapped by the caller under the RSA public key of the parameters
and unwrapped inside the HSM; it never exists in clear in the service. Audit records name the
key and the version made, never the material or the import token.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from keymanager.api.audit_trail import audited
from keymanager.api.deps import AUTHORIZED, AuditDep, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES, Body, decode_base64, encode_base64
from keymanager.api.schemas.keys import KeyOut

router = APIRouter(
    prefix="/v1/keys",
    tags=["key import"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)


class ImportParametersRequest(Body):
    wrapping_algorithm: str = Field(
        default="RSAES_OAEP_SHA_1",
        max_length=64,
        description="RSAES_OAEP_SHA_1 or RSA_AES_KEY_WRAP_SHA_1, where the HSM has its mechanisms.",
    )


class ImportParametersResponse(BaseModel):
    public_key: str = Field(description="Base64 of the RSA-2048 wrapping public key (DER SubjectPublicKeyInfo).")
    import_token: str
    expires_at: datetime


class ImportRequest(Body):
    import_token: str = Field(max_length=128)
    encrypted_key_material: str = Field(max_length=4096, description="Base64; the AES (or HMAC) key.")
    encrypted_mac_key_material: str | None = Field(
        default=None, max_length=4096, description="Base64; the HMAC key of an AES_256_CBC_HMAC_SHA256 key only."
    )
    import_type: str = Field(
        default="EXISTING_KEY_MATERIAL",
        max_length=32,
        description="EXISTING_KEY_MATERIAL: the first material, or the key's own again (nothing changes); "
        "NEW_KEY_MATERIAL: different material, which becomes a new primary version.",
    )


@router.post("/{key}/import-parameters", response_model=ImportParametersResponse)
@audited("key.import_parameters")
def import_parameters(
    key: str, body: ImportParametersRequest, svc: ServicesDep, trail: AuditDep
) -> ImportParametersResponse:
    """A fresh RSA wrapping key (made in the HSM, valid 24 h) for a key of origin ``external``."""
    trail.details.update(wrapping_algorithm=body.wrapping_algorithm[:64])
    found = svc.keys.find(key)
    trail.key_id = found.id
    made = svc.key_import.parameters(found, body.wrapping_algorithm)
    return ImportParametersResponse(
        public_key=encode_base64(made.public_key),
        import_token=made.import_token,
        expires_at=datetime.fromtimestamp(made.expires_at, UTC),
    )


@router.post("/{key}/import", response_model=KeyOut)
@audited("key.import")
def import_key_material(key: str, body: ImportRequest, svc: ServicesDep, trail: AuditDep) -> KeyOut:
    """Unwrap the material inside the HSM and check it there: the key's first version, its own material
    again (the key unchanged), or with ``import_type: NEW_KEY_MATERIAL`` a new primary version."""
    trail.details.update(import_type=body.import_type[:32])
    found = svc.keys.find(key)
    trail.key_id = found.id
    materials = [decode_base64(body.encrypted_key_material, "encrypted_key_material")]
    if body.encrypted_mac_key_material is not None:
        materials.append(decode_base64(body.encrypted_mac_key_material, "encrypted_mac_key_material"))
    imported = svc.key_import.import_material(
        found, body.import_token, materials, import_type=body.import_type, record=trail.success()
    )
    return KeyOut.of(imported, svc.keys.named([imported.policy])[0])
