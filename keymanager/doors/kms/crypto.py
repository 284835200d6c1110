"""The AWS KMS API's operations on keys in use: a second door to the same services.

Each operation translates AWS's request fields into a call of the very function the REST API
calls (``CryptoService.encrypt`` for Encrypt and ``POST /v1/keys/{key}/encrypt`` alike, and so
on), and its result into AWS's answer: so both doors share policy checks, key states, the
cryptography and the ciphertext (a ``CiphertextBlob`` is the binary spelling of a ``km:1``
ciphertext, see :mod:`keymanager.domain.kms_blob`). Encrypt, Decrypt and ReEncrypt with an
``RSAES_OAEP_*`` algorithm, or naming an asymmetric key, call ``AsymmetricService.encrypt`` /
``decrypt`` instead (the ``CiphertextBlob`` is then the raw OAEP ciphertext, as AWS's), whose
refusals (a symmetric key with an RSA algorithm, an RSA key without one) are the service's.
Policy mapping: Encrypt → ``encrypt``, Decrypt → ``decrypt``, GenerateDataKey* →
``generate_data_key``, ReEncrypt → ``decrypt`` on the source key and ``encrypt`` on the
destination (AWS's ReEncryptFrom/ReEncryptTo), GenerateMac/VerifyMac → ``mac``; the operations
of :mod:`keymanager.doors.kms.asymmetric` (Sign, Verify, ...) are served here too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from keymanager.domain import ciphertext as ct
from keymanager.domain import kms, kms_blob, kms_fields
from keymanager.domain.key_specs import EncryptionAlgorithm, spec_of
from keymanager.domain.models import Algorithm
from keymanager.domain.policy import Operation
from keymanager.doors.kms.asymmetric import KmsAsymmetric
from keymanager.doors.kms.call import Call, blob_of
from keymanager.errors import DecryptionFailed, KeyNotFound
from keymanager.hsm import Hsm
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.crypto import MAX_DATA_KEY_BYTES, CryptoService
from keymanager.services.crypto_results import Decrypted
from keymanager.services.snapshot import Snapshot

_SYMMETRIC = EncryptionAlgorithm.SYMMETRIC_DEFAULT
_DATA_KEY_SPECS = {"AES_256": 256, "AES_128": 128}


@dataclass(frozen=True)
class _Sealed:
    """A ciphertext as Encrypt and ReEncrypt answer it: the blob (base64), under which key, how."""

    blob: str
    key_id: str
    key_version: int
    algorithm: EncryptionAlgorithm


class KmsCrypto:
    """Encrypt, Decrypt, ReEncrypt, GenerateDataKey(WithoutPlaintext), GenerateRandom, GenerateMac,
    VerifyMac, and the asymmetric operations of :class:`KmsAsymmetric`."""

    def __init__(self, crypto: CryptoService, hsm: Hsm, asymmetric: AsymmetricService) -> None:
        self._crypto = crypto
        self._hsm = hsm
        self._asymmetric = asymmetric
        self.operations = {
            **KmsAsymmetric(asymmetric).operations,
            "Encrypt": self.encrypt,
            "Decrypt": self.decrypt,
            "ReEncrypt": self.reencrypt,
            "GenerateDataKey": self.generate_data_key,
            "GenerateDataKeyWithoutPlaintext": self.generate_data_key_without_plaintext,
            "GenerateRandom": self.generate_random,
            "GenerateMac": self.generate_mac,
            "VerifyMac": self.verify_mac,
        }

    async def encrypt(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        plaintext = kms_fields.blob(call.params, "Plaintext", low=1, high=kms.MAX_PLAINTEXT_BYTES)
        assert plaintext is not None
        algorithm = kms_fields.choice(call.params, "EncryptionAlgorithm", EncryptionAlgorithm)
        sealed = await self._seal(snapshot, call, call.ref(), plaintext, "EncryptionContext", algorithm)
        return {
            "CiphertextBlob": sealed.blob,
            "KeyId": call.arn(sealed.key_id),
            "EncryptionAlgorithm": sealed.algorithm,
        }

    async def decrypt(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        algorithm = kms_fields.choice(call.params, "EncryptionAlgorithm", EncryptionAlgorithm)
        opened, used = await self._open(snapshot, call, "CiphertextBlob", "KeyId", "EncryptionContext", algorithm)
        call.noted(opened.key_id, opened.key_version)
        return {
            "KeyId": call.arn(opened.key_id),
            "Plaintext": kms_fields.data(opened.plaintext),
            "EncryptionAlgorithm": used,
        }

    async def reencrypt(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        """Symmetric to symmetric: ``CryptoService.reencrypt`` (the plaintext stays in it); with an
        asymmetric side: Decrypt's opening, then Encrypt's sealing (the same rights as AWS's)."""
        destination = call.ref("DestinationKeyId")
        source_algorithm = kms_fields.choice(call.params, "SourceEncryptionAlgorithm", EncryptionAlgorithm)
        target_algorithm = kms_fields.choice(call.params, "DestinationEncryptionAlgorithm", EncryptionAlgorithm)
        asymmetric_source = await self._asymmetric_side(snapshot, call, "SourceKeyId", source_algorithm)
        asymmetric_target = await self._asymmetric_side(snapshot, call, "DestinationKeyId", target_algorithm)
        if asymmetric_source or asymmetric_target:
            blob_fields = ("CiphertextBlob", "SourceKeyId", "SourceEncryptionContext")
            opened, used = await self._open(snapshot, call, *blob_fields, source_algorithm)
            sealed = await self._seal(
                snapshot, call, destination, opened.plaintext, "DestinationEncryptionContext", target_algorithm
            )
            source_id = opened.key_id
        else:
            sealed, source_id = await self._reencrypt_symmetric(snapshot, call, destination)
            used = _SYMMETRIC
        return {
            "CiphertextBlob": sealed.blob,
            "SourceKeyId": call.arn(source_id),
            "KeyId": call.arn(sealed.key_id),
            "SourceEncryptionAlgorithm": used,
            "DestinationEncryptionAlgorithm": sealed.algorithm,
        }

    async def generate_data_key(self, snapshot: Snapshot, call: Call, *, plaintext: bool = True) -> dict[str, Any]:
        ref, bits = call.ref(), _data_key_bits(call.params)
        made = await self._crypto.generate_data_key(
            snapshot, call.principal, ref, bits, kms_fields.context(call.params)
        )
        key = await snapshot.key(made.encrypted.key_id)
        call.noted(made.encrypted.key_id, made.encrypted.key_version)
        answer = {"CiphertextBlob": blob_of(made.encrypted, key.algorithm), "KeyId": call.arn(key.id)}
        if plaintext:
            answer["Plaintext"] = kms_fields.data(made.plaintext)
        return answer

    async def generate_data_key_without_plaintext(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        return await self.generate_data_key(snapshot, call, plaintext=False)

    async def generate_random(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        if call.params.get("CustomKeyStoreId") is not None:
            raise kms.unsupported("CustomKeyStoreId")
        count = kms_fields.integer(call.params, "NumberOfBytes", 1, 1024)
        if count is None:
            raise kms.KmsError("ValidationException", "NumberOfBytes must be between 1 and 1024")
        return {"Plaintext": kms_fields.data(await asyncio.to_thread(self._hsm.random, count))}

    async def generate_mac(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        """HMAC(Message) as AWS computes it (unframed: no context, nothing before the message)."""
        ref, (algorithm, message) = call.ref(), _mac_request(call.params)
        made = await self._crypto.mac(snapshot, call.principal, ref, message, framed=False)
        call.noted(made.key_id, made.key_version)
        await _require_mac_algorithm(snapshot, made.key_id, algorithm)
        return {"Mac": kms_fields.data(made.mac), "MacAlgorithm": algorithm, "KeyId": call.arn(made.key_id)}

    async def verify_mac(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        ref, (algorithm, message) = call.ref(), _mac_request(call.params)
        mac = kms_fields.blob(call.params, "Mac", low=1, high=6144)
        assert mac is not None
        checked = await self._crypto.verify_mac(snapshot, call.principal, ref, message, mac, framed=False)
        call.noted(checked.key_id, checked.key_version)
        await _require_mac_algorithm(snapshot, checked.key_id, algorithm)
        if not checked.valid:
            raise kms.KmsError("KMSInvalidMacException", "The MAC does not verify")
        return {"KeyId": call.arn(checked.key_id), "MacValid": True, "MacAlgorithm": algorithm}

    # -- steps ------------------------------------------------------------------------------
    async def _asymmetric_side(
        self, snapshot: Snapshot, call: Call, key_field: str, algorithm: EncryptionAlgorithm | None
    ) -> bool:
        """Whether one side of a request is asymmetric: an RSAES algorithm, or ``key_field`` naming an
        asymmetric key (a key that does not exist is the service's to refuse: not asymmetric here)."""
        if algorithm not in (None, _SYMMETRIC):
            return True
        if call.params.get(key_field) is None:
            return False
        return await _is_asymmetric(snapshot, call.ref(key_field))

    async def _seal(
        self,
        snapshot: Snapshot,
        call: Call,
        ref: str,
        plaintext: bytes,
        context_field: str,
        algorithm: EncryptionAlgorithm | None,
    ) -> _Sealed:
        """``CryptoService.encrypt`` (as REST), its ciphertext spelt as a blob; with an RSAES algorithm
        or an asymmetric key, ``AsymmetricService.encrypt`` (raw OAEP, no encryption context)."""
        context = kms_fields.context(call.params, context_field)
        if algorithm not in (None, _SYMMETRIC) or await _is_asymmetric(snapshot, ref):
            _no_context(context, context_field)
            done = await self._asymmetric.encrypt(snapshot, call.principal, ref, plaintext, algorithm or _SYMMETRIC)
            call.noted(done.key_id, done.key_version)
            return _Sealed(kms_fields.data(done.ciphertext), done.key_id, done.key_version, done.algorithm)
        encrypted = await self._crypto.encrypt(snapshot, call.principal, ref, plaintext, context)
        key = await snapshot.key(encrypted.key_id)
        call.noted(encrypted.key_id, encrypted.key_version)
        return _Sealed(blob_of(encrypted, key.algorithm), encrypted.key_id, encrypted.key_version, _SYMMETRIC)

    async def _open(
        self,
        snapshot: Snapshot,
        call: Call,
        blob_field: str,
        key_field: str,
        context_field: str,
        algorithm: EncryptionAlgorithm | None,
    ) -> tuple[Decrypted, EncryptionAlgorithm]:
        """``CryptoService.decrypt`` (as REST) of a blob, every tampered blob InvalidCiphertextException;
        with an RSAES algorithm or an asymmetric ``key_field`` (which AWS then requires), the raw
        ciphertext through ``AsymmetricService.decrypt`` (in the HSM)."""
        if await self._asymmetric_side(snapshot, call, key_field, algorithm):
            if call.params.get(key_field) is None:
                raise kms.KmsError("ValidationException", f"{key_field} is required to decrypt with {algorithm}")
            ciphertext = kms_fields.blob(call.params, blob_field, low=1, high=kms_blob.MAX_BLOB_BYTES)
            _no_context(kms_fields.context(call.params, context_field), context_field)
            assert ciphertext is not None
            used = algorithm or _SYMMETRIC
            opened = await self._asymmetric.decrypt(snapshot, call.principal, call.ref(key_field), ciphertext, used)
            return opened, used
        parsed, claimed, ref, context = await self._parse_blob(snapshot, call, blob_field, key_field, context_field)
        opened = await self._crypto.decrypt(snapshot, call.principal, parsed.encode(), context, ref=ref)
        await _require_algorithm(snapshot, opened.key_id, claimed)
        return opened, _SYMMETRIC

    async def _reencrypt_symmetric(self, snapshot: Snapshot, call: Call, destination: str) -> tuple[_Sealed, str]:
        """``CryptoService.reencrypt`` between two symmetric keys: the new ciphertext, and the source key's id."""
        parsed, algorithm, ref, context = await self._parse_blob(
            snapshot, call, "CiphertextBlob", "SourceKeyId", "SourceEncryptionContext"
        )
        done, opened_with = await self._crypto.reencrypt(
            snapshot,
            call.principal,
            parsed.encode(),
            context,
            ref=ref,
            destination=destination,
            destination_context=kms_fields.context(call.params, "DestinationEncryptionContext") or {},
            operation=Operation.DECRYPT,
        )
        await _require_algorithm(snapshot, opened_with.key_id, algorithm)
        call.noted(done.key_id, done.key_version)
        key = await snapshot.key(done.key_id)
        return _Sealed(blob_of(done, key.algorithm), done.key_id, done.key_version, _SYMMETRIC), opened_with.key_id

    async def _parse_blob(
        self, snapshot: Snapshot, call: Call, blob_field: str, key_field: str, context_field: str
    ) -> tuple[ct.Ciphertext, Algorithm, str | None, dict[str, str] | None]:
        """The ciphertext of a blob, the algorithm it claims, the key ``key_field`` names (if it does:
        IncorrectKeyException unless that key made the blob) and the encryption context."""
        blob = kms_fields.blob(call.params, blob_field, low=1, high=kms_blob.MAX_BLOB_BYTES)
        context = kms_fields.context(call.params, context_field)
        try:
            parsed, algorithm = kms_blob.decode(blob or b"")
        except DecryptionFailed:
            raise kms.aws_error(DecryptionFailed()) from None
        ref = None
        if call.params.get(key_field) is not None:
            ref = call.ref(key_field)
            if (await snapshot.key(ref)).id != parsed.key_id:
                raise kms.KmsError(
                    "IncorrectKeyException",
                    "The key ID in the request does not identify the key that encrypted the ciphertext",
                )
        return parsed, algorithm, ref, context


async def _is_asymmetric(snapshot: Snapshot, ref: str) -> bool:
    """Whether ``ref`` names an asymmetric key (False when it names none: the service refuses that)."""
    try:
        return spec_of((await snapshot.key(ref)).algorithm).asymmetric
    except KeyNotFound:
        return False


def _no_context(context: Mapping[str, str] | None, field: str) -> None:
    """ValidationException for an encryption context given to RSAES-OAEP, which has none (as AWS)."""
    if context:
        raise kms.KmsError("ValidationException", f"{field} is not accepted with an asymmetric key")


async def _require_algorithm(snapshot: Snapshot, key_id: str, algorithm: Algorithm) -> None:
    """InvalidCiphertextException unless key ``key_id`` is of the ``algorithm`` its blob claims."""
    if (await snapshot.key(key_id)).algorithm is not algorithm:
        raise kms.aws_error(DecryptionFailed())


def _data_key_bits(params: Mapping[str, Any]) -> int:
    """The size of the data key asked for: ``KeySpec`` (AES_128, AES_256) or ``NumberOfBytes``
    (1-1,024), exactly one of them."""
    spec = kms_fields.string(params, "KeySpec", limit=16)
    count = kms_fields.integer(params, "NumberOfBytes", 1, MAX_DATA_KEY_BYTES)
    if (spec is None) == (count is None):
        raise kms.KmsError("ValidationException", "Please specify either number of bytes or key spec.")
    if spec is not None:
        if spec not in _DATA_KEY_SPECS:
            raise kms.KmsError("ValidationException", "KeySpec must be AES_256 or AES_128")
        return _DATA_KEY_SPECS[spec]
    assert count is not None
    return 8 * count


def _mac_request(params: Mapping[str, Any]) -> tuple[str, bytes]:
    """``MacAlgorithm`` (one of AWS's) and ``Message`` (1-4,096 bytes)."""
    algorithm = kms_fields.string(params, "MacAlgorithm", required=True, limit=32)
    if algorithm not in kms.MAC_ALGORITHMS.values():
        raise kms.KmsError(
            "ValidationException", f"MacAlgorithm must be one of {', '.join(kms.MAC_ALGORITHMS.values())}"
        )
    message = kms_fields.blob(params, "Message", low=1, high=kms.MAX_PLAINTEXT_BYTES)
    assert algorithm is not None and message is not None
    return algorithm, message


async def _require_mac_algorithm(snapshot: Snapshot, key_id: str, algorithm: str) -> None:
    """InvalidKeyUsageException unless ``algorithm`` is the key's (checked after the policy, so a caller
    the policy refuses learns nothing of the key)."""
    expected = kms.MAC_ALGORITHMS[(await snapshot.key(key_id)).algorithm]
    if algorithm != expected:
        raise kms.KmsError("InvalidKeyUsageException", f"the key's MacAlgorithm is {expected}, not {algorithm}")
