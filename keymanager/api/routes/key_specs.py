"""``/v1/key-specs``: the table of key types (``domain/key_specs/``) as the service has it.

What a client may create, per usage the algorithms a key of each spec accepts, and how the doors
(Transit, XKS, KMIP) name each spec — read from the one table, so a client (the SDK, kmctl, the
console) needs no list of its own. Any authenticated principal may read it; it touches no key or
principal, so it writes no audit record.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from keymanager.api.audit_trail import unaudited
from keymanager.api.deps import AUTHORIZED
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES
from keymanager.domain.key_specs import SPECS, KeySpec

router = APIRouter(
    prefix="/v1", tags=["keys"], responses=ERROR_RESPONSES, dependencies=[AUTHORIZED], route_class=StrictJsonRoute
)


class KeySpecOut(BaseModel):
    """One row of the table of key types."""

    name: str = Field(description="The native name: a key's `algorithm`.")
    kms_key_spec: str | None = Field(description="AWS KMS `KeySpec` (null: the spec has none, e.g. FF1).")
    key_type: str = Field(description="The PKCS#11 key type of its objects (`CKK_<name>`).")
    key_bits: int | None = Field(description="RSA modulus or secret key bits (null for curves).")
    curve: str | None = Field(description="The named curve (null for RSA and secret keys).")
    asymmetric: bool
    default_usage: str | None = Field(description="The usage a create naming none gets (null: it must name one).")
    usages: dict[str, list[str]] = Field(description="Each usage it may be created for, with the algorithms it allows.")
    mode: str | None = Field(
        description="How its AES object seals: `CBC_HMAC`, `GCM` or `CBC_PAD` (null: it does not encrypt with AES)."
    )
    transit_type: str | None = Field(
        description="Vault Transit's name of the key type (`aes256-gcm96`, `hmac`, …; "
        "null: the Transit door does not serve it)."
    )
    xks_spec: str | None = Field(description="AWS XKS's `keySpec` (`AES_256`; null: the XKS door does not serve it).")
    kmip_algorithm: str | None = Field(
        description="KMIP's Cryptographic Algorithm (`AES`, `HMAC_SHA256`, `RSA`, `EC`, `ED25519`; "
        "null: the KMIP door does not name it)."
    )
    kmip_length: int | None = Field(
        description="KMIP's Cryptographic Length: `key_bits`, or the curve's bits "
        "(null: the KMIP door does not name it)."
    )

    @classmethod
    def of(cls, spec: KeySpec) -> KeySpecOut:
        return cls(
            name=spec.algorithm.value,
            kms_key_spec=spec.kms_spec,
            key_type=spec.key_type.value,
            key_bits=spec.key_bits,
            curve=spec.curve,
            asymmetric=spec.asymmetric,
            default_usage=None if spec.default_usage is None else spec.default_usage.value,
            usages={usage.value: list(entry.algorithm_names()) for usage, entry in spec.usages.items()},
            mode=None if spec.mode is None else spec.mode.value,
            transit_type=spec.transit_type,
            xks_spec=spec.xks_spec,
            kmip_algorithm=spec.kmip_algorithm,
            kmip_length=spec.kmip_length,
        )


class KeySpecList(BaseModel):
    specs: list[KeySpecOut]


@router.get("/key-specs", response_model=KeySpecList)
@unaudited("key_spec.list")
def list_key_specs() -> KeySpecList:
    """Every key spec of the table, in table order, with its usages and their algorithms (whether this
    HSM can make a spec is ``GET /v1/health?detail=true``'s; a create it cannot is refused by name)."""
    return KeySpecList(specs=[KeySpecOut.of(spec) for spec in SPECS.values()])
