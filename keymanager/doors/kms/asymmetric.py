"""The AWS KMS API's operations on asymmetric keys: Sign, Verify, GetPublicKey, DeriveSharedSecret,
GenerateDataKeyPair and GenerateDataKeyPairWithoutPlaintext.

Each translates AWS's fields into a call of :class:`~keymanager.services.asymmetric.AsymmetricService`,
the very method the native routes call (``POST /v1/keys/{key}/sign`` and Sign alike), and its
answer into AWS's. Every refusal is the service's (``errors.py``: WrongKeyUsage, UnsupportedAlgorithm,
WrongDigestLength, MessageTooLong, InvalidPeerKey, UnsupportedByHsm, the policy's and the key
state's), spelt in AWS's words by ``kms.aws_error``; only a failed verification is the door's to
spell: a result for the service, ``KMSInvalidSignatureException`` for AWS. Policy rights: Sign →
``sign``, Verify → ``verify``, GetPublicKey → ``get_public_key``, DeriveSharedSecret →
``derive_shared_secret``, GenerateDataKeyPair(WithoutPlaintext) → ``generate_data_key_pair``.
RSAES-OAEP encryption and decryption are Encrypt's and Decrypt's (:mod:`keymanager.doors.kms.crypto`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from keymanager.domain import kms, kms_fields
from keymanager.domain.key_specs import (
    DATA_KEY_PAIR_SPECS,
    Algorithm,
    KeyAgreementAlgorithm,
    MessageType,
    SigningAlgorithm,
    spec_of,
)
from keymanager.doors.kms.call import Call, blob_of
from keymanager.errors import WrongKeyUsage
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.snapshot import Snapshot

Operation = Callable[[Snapshot, Call], Awaitable[dict[str, Any]]]
MAX_SIGNATURE_BYTES = 6144
MAX_PUBLIC_KEY_BYTES = 8192


class KmsAsymmetric:
    """Sign, Verify, GetPublicKey, DeriveSharedSecret, GenerateDataKeyPair(WithoutPlaintext)."""

    def __init__(self, asymmetric: AsymmetricService) -> None:
        self._asymmetric = asymmetric
        self.operations: dict[str, Operation] = {
            "Sign": self.sign,
            "Verify": self.verify,
            "GetPublicKey": self.get_public_key,
            "DeriveSharedSecret": self.derive_shared_secret,
            "GenerateDataKeyPair": self.generate_data_key_pair,
            "GenerateDataKeyPairWithoutPlaintext": self.generate_data_key_pair_without_plaintext,
        }

    async def sign(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        """A signature made in the HSM (ECDSA DER-encoded, as AWS)."""
        ref, (message, message_type, algorithm) = call.ref(), _signing_request(call)
        signed = await self._asymmetric.sign(snapshot, call.principal, ref, message, message_type, algorithm)
        call.noted(signed.key_id, signed.key_version)
        return {
            "KeyId": call.arn(signed.key_id),
            "Signature": kms_fields.data(signed.signature),
            "SigningAlgorithm": algorithm,
        }

    async def verify(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        """``SignatureValid`` true, or KMSInvalidSignatureException (as AWS) for a signature that does not verify."""
        ref, (message, message_type, algorithm) = call.ref(), _signing_request(call)
        signature = kms_fields.blob(call.params, "Signature", low=1, high=MAX_SIGNATURE_BYTES)
        assert signature is not None
        checked = await self._asymmetric.verify(
            snapshot, call.principal, ref, message, message_type, signature, algorithm
        )
        call.noted(checked.key_id, checked.key_version)
        if not checked.valid:
            raise kms.KmsError("KMSInvalidSignatureException", "The signature does not verify")
        return {"KeyId": call.arn(checked.key_id), "SignatureValid": True, "SigningAlgorithm": algorithm}

    async def get_public_key(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        """The DER SubjectPublicKeyInfo and what the key takes; UnsupportedOperationException for a
        symmetric key (AWS's answer there, where the service says WrongKeyUsage)."""
        ref = call.ref()
        try:
            info = await self._asymmetric.public_key(snapshot, call.principal, ref)
        except WrongKeyUsage as exc:
            raise kms.KmsError("UnsupportedOperationException", exc.message) from None
        call.noted(info.key_id, info.key_version)
        return {
            "KeyId": call.arn(info.key_id),
            "PublicKey": kms_fields.data(info.spki_der),
            "CustomerMasterKeySpec": kms.key_spec(info.key),
            "KeySpec": kms.key_spec(info.key),
            "KeyUsage": kms.key_usage(info.key),
            **kms.algorithms(info.key),
        }

    async def derive_shared_secret(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        """ECDH of the key's private half (in the HSM) with the peer's DER SubjectPublicKeyInfo."""
        ref = call.ref()
        algorithm = kms_fields.choice(call.params, "KeyAgreementAlgorithm", KeyAgreementAlgorithm, required=True)
        peer = kms_fields.blob(call.params, "PublicKey", low=1, high=MAX_PUBLIC_KEY_BYTES)
        assert algorithm is not None and peer is not None
        derived = await self._asymmetric.derive_shared_secret(snapshot, call.principal, ref, peer, algorithm)
        call.noted(derived.key_id, derived.key_version)
        return {
            "KeyId": call.arn(derived.key_id),
            "SharedSecret": kms_fields.data(derived.shared_secret),
            "KeyAgreementAlgorithm": algorithm,
            "KeyOrigin": "AWS_KMS",
        }

    async def generate_data_key_pair(self, snapshot: Snapshot, call: Call, *, plaintext: bool = True) -> dict[str, Any]:
        """A new key pair; its private key (PKCS#8 DER) encrypted under the symmetric key ``KeyId`` as a
        ``CiphertextBlob`` of ours (Decrypt opens it), and in plaintext unless WithoutPlaintext."""
        ref, (name, pair_spec) = call.ref(), _pair_spec(call)
        made = await self._asymmetric.generate_data_key_pair(
            snapshot, call.principal, ref, pair_spec, kms_fields.context(call.params), include_plaintext=plaintext
        )
        sealed = made.private_key_ciphertext
        call.noted(sealed.key_id, sealed.key_version)
        wrapping = await snapshot.key(sealed.key_id)
        answer = {
            "PrivateKeyCiphertextBlob": blob_of(sealed, wrapping.algorithm),
            "PublicKey": kms_fields.data(made.public_key),
            "KeyId": call.arn(sealed.key_id),
            "KeyPairSpec": name,
        }
        if made.private_key_plaintext is not None:
            answer["PrivateKeyPlaintext"] = kms_fields.data(made.private_key_plaintext)
        return answer

    async def generate_data_key_pair_without_plaintext(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        return await self.generate_data_key_pair(snapshot, call, plaintext=False)


def _signing_request(call: Call) -> tuple[bytes, MessageType, SigningAlgorithm]:
    """``Message`` (its bounds are the service's: RAW ≤ 4,096 bytes, DIGEST the digest's length),
    ``MessageType`` (RAW when absent) and ``SigningAlgorithm``."""
    message = kms_fields.blob(call.params, "Message", low=1, high=kms.MAX_BODY_BYTES)
    message_type = kms_fields.choice(call.params, "MessageType", MessageType) or MessageType.RAW
    algorithm = kms_fields.choice(call.params, "SigningAlgorithm", SigningAlgorithm, required=True)
    assert message is not None and algorithm is not None
    return message, message_type, algorithm


def _pair_spec(call: Call) -> tuple[str, Algorithm]:
    """The native spec of ``KeyPairSpec``: UnsupportedOperationException for a spec the table makes
    no data key pairs of or has no row of (AWS's SM2, ML-KEM), ValidationException for a name AWS
    does not have either."""
    name = kms_fields.string(call.params, "KeyPairSpec", required=True, limit=64)
    assert name is not None
    spec = kms.creatable(name)
    if spec is None or spec not in DATA_KEY_PAIR_SPECS:
        if (spec is not None and spec_of(spec).asymmetric) or name in kms.AWS_ONLY:
            raise kms.unsupported(f"KeyPairSpec {name}")
        raise kms.KmsError("ValidationException", f"KeyPairSpec must be one of {', '.join(DATA_KEY_PAIR_SPECS)}")
    return name, spec
