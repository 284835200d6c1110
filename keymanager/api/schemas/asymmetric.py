"""The bodies of the routes of asymmetric keys: public keys, signing and verifying, key agreement
and data key pairs.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from keymanager.api.schemas import Body, Context
from keymanager.domain.key_specs import (
    DATA_KEY_PAIR_SPECS,
    KeyAgreementAlgorithm,
    KeyUsage,
    MessageType,
    SigningAlgorithm,
)
from keymanager.domain.models import Algorithm


class PublicKeyResponse(BaseModel):
    key_id: str
    algorithm: Algorithm
    usage: KeyUsage
    public_key: str = Field(description="Base64 of the DER SubjectPublicKeyInfo.")
    public_key_pem: str
    signing_algorithms: list[str] | None = None
    encryption_algorithms: list[str] | None = None
    key_agreement_algorithms: list[str] | None = None


Base64Message = Annotated[str, Field(max_length=8192, description="Standard base64.")]


class SignRequest(Body):
    message: Base64Message = Field(description="Base64 of the message (RAW, ≤ 4,096 bytes) or of its digest.")
    message_type: Annotated[MessageType, Field(strict=False)] = MessageType.RAW
    algorithm: Annotated[SigningAlgorithm, Field(strict=False)]


class SignResponse(BaseModel):
    signature: str = Field(description="Base64; ECDSA: DER; Ed25519: 64 raw bytes; RSA: the raw signature.")
    key_id: str
    algorithm: SigningAlgorithm


class VerifyRequest(Body):
    message: Base64Message
    message_type: Annotated[MessageType, Field(strict=False)] = MessageType.RAW
    signature: Base64Message
    algorithm: Annotated[SigningAlgorithm, Field(strict=False)]


class VerifyResponse(BaseModel):
    valid: bool
    key_id: str
    algorithm: SigningAlgorithm


class DeriveSharedSecretRequest(Body):
    public_key: Annotated[str, Field(max_length=4096, description="Base64 of the peer's DER SubjectPublicKeyInfo.")]
    algorithm: Annotated[KeyAgreementAlgorithm, Field(strict=False)] = KeyAgreementAlgorithm.ECDH


class DeriveSharedSecretResponse(BaseModel):
    shared_secret: str = Field(description="Base64 of the raw ECDH shared secret (the x-coordinate).")
    key_id: str
    algorithm: KeyAgreementAlgorithm


class DataKeyPairRequest(Body):
    key_pair_spec: Annotated[Algorithm, Field(strict=False, description=f"One of {', '.join(DATA_KEY_PAIR_SPECS)}.")]
    include_plaintext: bool = True
    context: Context | None = None


class DataKeyPairResponse(BaseModel):
    key_id: str
    key_pair_spec: Algorithm
    public_key: str = Field(description="Base64 of the DER SubjectPublicKeyInfo.")
    private_key_ciphertext: str = Field(description="km:1 ciphertext of the PKCS#8 DER private key (see /decrypt).")
    private_key_plaintext: str | None = Field(default=None, description="Base64 of the PKCS#8 DER private key.")
