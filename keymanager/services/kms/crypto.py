"""The AWS KMS API's operations on keys in use: a second door to the same services.

Each operation translates AWS's request fields into a call of the very function the REST API
calls (``CryptoService.encrypt`` for Encrypt and ``POST /v1/keys/{key}/encrypt`` alike, and so
on), and its result into AWS's answer: so both doors share policy checks, key states, the
cryptography and the ciphertext (a ``CiphertextBlob`` is the binary spelling of a ``km:1``
ciphertext, see :mod:`keymanager.domain.kms_blob`). Policy mapping: Encrypt → ``encrypt``,
Decrypt → ``decrypt``, GenerateDataKey* → ``generate_data_key``, ReEncrypt → ``decrypt`` on the
source key and ``encrypt`` on the destination (AWS's ReEncryptFrom/ReEncryptTo),
GenerateMac/VerifyMac → ``mac``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from keymanager.domain import ciphertext as ct
from keymanager.domain import kms, kms_blob
from keymanager.domain.models import Algorithm, Principal
from keymanager.domain.policy import Operation
from keymanager.errors import DecryptionFailed, InvalidRequest, KeyNotFound
from keymanager.hsm import Hsm
from keymanager.services.crypto import MAX_DATA_KEY_BYTES, CryptoService, Decrypted, Encrypted
from keymanager.services.snapshot import Snapshot

_SYMMETRIC = "SYMMETRIC_DEFAULT"
_DATA_KEY_SPECS = {"AES_256": 256, "AES_128": 128}
_ENCRYPTING = (Algorithm.AES_256_GCM, Algorithm.AES_256_CBC_HMAC_SHA256)
T = TypeVar("T")


@dataclass
class Call:
    """One KMS request: who, where (region of the signature), what; what its audit record names."""

    principal: Principal
    region: str
    account: str
    params: Mapping[str, Any]
    key_id: str | None = None
    key_version: int | None = None
    key_ref: str | None = None
    """The last key reference the request named (its audit record names that key when refused)."""

    def arn(self, key_id: str) -> str:
        return kms.key_arn(key_id, self.region, self.account)

    def ref(self, field: str = "KeyId") -> str:
        """The native reference of the (required) key field ``field``."""
        value = kms.string(self.params, field, required=True)
        assert value is not None
        self.key_ref = kms.resolve(value, self.account)
        return self.key_ref

    def noted(self, key_id: str, key_version: int | None = None) -> None:
        self.key_id, self.key_version = key_id, key_version


def page(
    params: Mapping[str, Any], items: Sequence[T], *, most: int = 1000, default: int = 100
) -> tuple[list[T], dict[str, Any]]:
    """One page of ``items`` (``Limit`` 1-``most``) from ``Marker`` (an offset, as AWS's opaque
    string), and the answer's ``Truncated`` and (when truncated) ``NextMarker``."""
    limit = kms.integer(params, "Limit", 1, most) or default
    marker = kms.string(params, "Marker", limit=16)
    start = 0
    if marker is not None:
        if not marker.isdigit():
            raise kms.KmsError("InvalidMarkerException", "the marker is not one this service gave")
        start = int(marker)
    end = start + limit
    rest: dict[str, Any] = {"Truncated": end < len(items)}
    if end < len(items):
        rest["NextMarker"] = str(end)
    return list(items[start:end]), rest


class KmsCrypto:
    """Encrypt, Decrypt, ReEncrypt, GenerateDataKey(WithoutPlaintext), GenerateRandom, GenerateMac, VerifyMac."""

    def __init__(self, crypto: CryptoService, hsm: Hsm) -> None:
        self._crypto = crypto
        self._hsm = hsm
        self.operations = {
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
        plaintext = kms.blob(call.params, "Plaintext", low=1, high=kms.MAX_PLAINTEXT_BYTES)
        assert plaintext is not None
        sealed = await self._seal(snapshot, call, call.ref(), plaintext, kms.context(call.params))
        return {"CiphertextBlob": sealed[0], "KeyId": call.arn(sealed[1].key_id), "EncryptionAlgorithm": _SYMMETRIC}

    async def decrypt(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        opened = await self._open(snapshot, call, "CiphertextBlob", "KeyId", "EncryptionContext")
        call.noted(opened.key_id, opened.key_version)
        return {
            "KeyId": call.arn(opened.key_id),
            "Plaintext": kms.data(opened.plaintext),
            "EncryptionAlgorithm": _SYMMETRIC,
        }

    async def reencrypt(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        destination = call.ref("DestinationKeyId")
        parsed, algorithm, ref, context = await self._parse_blob(
            snapshot, call, "CiphertextBlob", "SourceKeyId", "SourceEncryptionContext"
        )
        destination_context = kms.context(call.params, "DestinationEncryptionContext") or {}
        try:
            done, opened_with = await self._crypto.reencrypt(
                snapshot,
                call.principal,
                parsed.encode(),
                context,
                ref=ref,
                destination=destination,
                destination_context=destination_context,
                operation=Operation.DECRYPT,
            )
        except InvalidRequest:  # a key of another kind: the source's, else the destination's
            source = ref or parsed.key_id
            wrong = source if (await snapshot.key(source)).algorithm not in _ENCRYPTING else destination
            raise await _usage_error(snapshot, wrong) from None
        await _require_algorithm(snapshot, opened_with.key_id, algorithm)
        call.noted(done.key_id, done.key_version)
        return {
            "CiphertextBlob": _blob(done, (await snapshot.key(done.key_id)).algorithm),
            "SourceKeyId": call.arn(opened_with.key_id),
            "KeyId": call.arn(done.key_id),
            "SourceEncryptionAlgorithm": _SYMMETRIC,
            "DestinationEncryptionAlgorithm": _SYMMETRIC,
        }

    async def generate_data_key(self, snapshot: Snapshot, call: Call, *, plaintext: bool = True) -> dict[str, Any]:
        ref, bits = call.ref(), _data_key_bits(call.params)
        try:
            made = await self._crypto.generate_data_key(snapshot, call.principal, ref, bits, kms.context(call.params))
        except InvalidRequest:
            raise await _usage_error(snapshot, ref) from None
        key = await snapshot.key(made.encrypted.key_id)
        call.noted(made.encrypted.key_id, made.encrypted.key_version)
        answer = {"CiphertextBlob": _blob(made.encrypted, key.algorithm), "KeyId": call.arn(key.id)}
        if plaintext:
            answer["Plaintext"] = kms.data(made.plaintext)
        return answer

    async def generate_data_key_without_plaintext(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        return await self.generate_data_key(snapshot, call, plaintext=False)

    async def generate_random(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        if call.params.get("CustomKeyStoreId") is not None:
            raise kms.unsupported("CustomKeyStoreId")
        count = kms.integer(call.params, "NumberOfBytes", 1, 1024)
        if count is None:
            raise kms.KmsError("ValidationException", "NumberOfBytes must be between 1 and 1024")
        return {"Plaintext": kms.data(await asyncio.to_thread(self._hsm.random, count))}

    async def generate_mac(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        """HMAC(Message) as AWS computes it (unframed: no context, nothing before the message)."""
        ref, (algorithm, message) = call.ref(), _mac_request(call.params)
        try:
            made = await self._crypto.mac(snapshot, call.principal, ref, message, framed=False)
        except InvalidRequest:
            raise await _usage_error(snapshot, ref, mac=True) from None
        call.noted(made.key_id, made.key_version)
        await _require_mac_algorithm(snapshot, made.key_id, algorithm)
        return {"Mac": kms.data(made.mac), "MacAlgorithm": algorithm, "KeyId": call.arn(made.key_id)}

    async def verify_mac(self, snapshot: Snapshot, call: Call) -> dict[str, Any]:
        ref, (algorithm, message) = call.ref(), _mac_request(call.params)
        mac = kms.blob(call.params, "Mac", low=1, high=6144)
        assert mac is not None
        try:
            checked = await self._crypto.verify_mac(snapshot, call.principal, ref, message, mac, framed=False)
        except InvalidRequest:
            raise await _usage_error(snapshot, ref, mac=True) from None
        call.noted(checked.key_id, checked.key_version)
        await _require_mac_algorithm(snapshot, checked.key_id, algorithm)
        if not checked.valid:
            raise kms.KmsError("KMSInvalidMacException", "The MAC does not verify")
        return {"KeyId": call.arn(checked.key_id), "MacValid": True, "MacAlgorithm": algorithm}

    # -- steps ------------------------------------------------------------------------------
    async def _seal(
        self, snapshot: Snapshot, call: Call, ref: str, plaintext: bytes, context: dict[str, str] | None
    ) -> tuple[str, Encrypted]:
        """``CryptoService.encrypt`` (as REST), its ciphertext spelt as a blob."""
        try:
            done = await self._crypto.encrypt(snapshot, call.principal, ref, plaintext, context)
        except InvalidRequest:
            raise await _usage_error(snapshot, ref) from None
        key = await snapshot.key(done.key_id)
        call.noted(done.key_id, done.key_version)
        return _blob(done, key.algorithm), done

    async def _open(
        self, snapshot: Snapshot, call: Call, blob_field: str, key_field: str, context_field: str
    ) -> Decrypted:
        """``CryptoService.decrypt`` (as REST) of a blob; every tampered blob is InvalidCiphertextException."""
        parsed, algorithm, ref, context = await self._parse_blob(snapshot, call, blob_field, key_field, context_field)
        try:
            opened = await self._crypto.decrypt(snapshot, call.principal, parsed.encode(), context, ref=ref)
        except InvalidRequest:  # the blob names an HMAC key
            raise await _usage_error(snapshot, ref or parsed.key_id) from None
        await _require_algorithm(snapshot, opened.key_id, algorithm)
        return opened

    async def _parse_blob(
        self, snapshot: Snapshot, call: Call, blob_field: str, key_field: str, context_field: str
    ) -> tuple[ct.Ciphertext, Algorithm, str | None, dict[str, str] | None]:
        """The ciphertext of a blob, the algorithm it claims, the key ``key_field`` names (if it does:
        IncorrectKeyException unless that key made the blob) and the encryption context."""
        blob = kms.blob(call.params, blob_field, low=1, high=kms_blob.MAX_BLOB_BYTES)
        context = kms.context(call.params, context_field)
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


async def _require_algorithm(snapshot: Snapshot, key_id: str, algorithm: Algorithm) -> None:
    """InvalidCiphertextException unless key ``key_id`` is of the ``algorithm`` its blob claims."""
    if (await snapshot.key(key_id)).algorithm is not algorithm:
        raise kms.aws_error(DecryptionFailed())


def _blob(done: Encrypted, algorithm: Algorithm) -> str:
    """The blob of a ciphertext the service just made (so its text needs no checks: ~4x cheaper than parsing)."""
    body = base64.b64decode(done.ciphertext.rsplit(":", 1)[1])
    return kms.data(kms_blob.encode(ct.Ciphertext(done.key_id, done.key_version, body), algorithm))


async def _usage_error(snapshot: Snapshot, ref: str, *, mac: bool = False) -> kms.KmsError:
    """InvalidKeyUsageException for a key of the wrong kind (the service said InvalidRequest)."""
    try:
        key = await snapshot.key(ref)
    except KeyNotFound:
        return kms.KmsError("NotFoundException", "key not found")
    if (key.algorithm in kms.MAC_ALGORITHMS) is not mac:
        usage = "GENERATE_VERIFY_MAC" if key.algorithm in kms.MAC_ALGORITHMS else "ENCRYPT_DECRYPT"
        return kms.KmsError("InvalidKeyUsageException", f"the key's KeyUsage is {usage}")
    return kms.KmsError("ValidationException", "the request is invalid for this key")


def _data_key_bits(params: Mapping[str, Any]) -> int:
    """The size of the data key asked for: ``KeySpec`` (AES_128, AES_256) or ``NumberOfBytes``
    (1-1,024), exactly one of them."""
    spec = kms.string(params, "KeySpec", limit=16)
    count = kms.integer(params, "NumberOfBytes", 1, MAX_DATA_KEY_BYTES)
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
    algorithm = kms.string(params, "MacAlgorithm", required=True, limit=32)
    if algorithm not in kms.MAC_ALGORITHMS.values():
        raise kms.KmsError(
            "ValidationException", f"MacAlgorithm must be one of {', '.join(kms.MAC_ALGORITHMS.values())}"
        )
    message = kms.blob(params, "Message", low=1, high=kms.MAX_PLAINTEXT_BYTES)
    assert algorithm is not None and message is not None
    return algorithm, message


async def _require_mac_algorithm(snapshot: Snapshot, key_id: str, algorithm: str) -> None:
    """InvalidKeyUsageException unless ``algorithm`` is the key's (checked after the policy, so a caller
    the policy refuses learns nothing of the key)."""
    expected = kms.MAC_ALGORITHMS[(await snapshot.key(key_id)).algorithm]
    if algorithm != expected:
        raise kms.KmsError("InvalidKeyUsageException", f"the key's MacAlgorithm is {expected}, not {algorithm}")
