"""The four targets as blob operations: what one encrypt and one decrypt of a blob cost a client.

- ``km``: the service encrypts on board: ``/encrypt`` for small fields, the on-board stream
  (``/encrypt/stream``) for blobs above ``SMALL_LIMIT``.
- ``km-batch``: fields in batches (``encrypt_many`` / ``decrypt_many``); one operation is a batch.
- ``km-envelope``: the SDK's ``encrypt_stream`` / ``decrypt_stream``: a data key per blob from the
  service, framed AES-256-GCM locally.
- ``aws-kms``: boto3 ``Encrypt`` / ``Decrypt`` up to 4 KB; above, ``GenerateDataKey`` per blob and the
  same framed AES-256-GCM locally (as the AWS Encryption SDK does).
- ``km-kms-api``: the same boto3 code as ``aws-kms``, against keymanager's AWS KMS API door.
- ``km-gcm``: as ``km``, on the door's ``AES_256_GCM`` key (one HSM call per field instead of two).
- ``km-esdk``: the unmodified AWS Encryption SDK (``aws-encryption-sdk``) through keymanager's KMS
  door: ``GenerateDataKey`` / ``Decrypt`` per blob there, the SDK's framed AES-GCM in the client.

Nothing is cached between operations that a real client would not cache: every envelope gets a
fresh data key, and every decryption unwraps its data key again.
"""

from __future__ import annotations

import base64
import io
import os
from dataclasses import dataclass
from typing import Any, Protocol

from keymanager_sdk import APIError, KeyManager, decrypt_envelope, encrypt_envelope

from bench.aws import AwsConfig
from bench.service import Endpoint

SMALL_LIMIT = 64 * 1024
"""Largest field the service encrypts with ``/encrypt`` (its default plaintext limit)."""
KMS_DIRECT_LIMIT = 4096
"""Largest plaintext AWS KMS ``Encrypt`` takes."""
DEFAULT_TARGETS = ("km", "km-batch", "km-envelope", "aws-kms", "km-kms-api")
"""What ``blobs`` measures unless ``--targets`` says otherwise."""
TARGET_NAMES = (*DEFAULT_TARGETS, "km-gcm", "km-esdk")
BOTO3_TARGETS = ("aws-kms", "km-kms-api")
WHERE_AES_RUNS = {
    "km": "in the HSM (CBC+HMAC)",
    "km-gcm": "in the HSM (GCM)",
    "km-batch": "in the HSM (CBC+HMAC), 100 fields per request",
    "km-envelope": "in the client (data key from the HSM)",
    "km-kms-api": "in the HSM (GCM) up to 4 KiB; above, in the client (data key from the HSM)",
    "aws-kms": "in the KMS up to 4 KiB; above, in the client (data key from the KMS)",
    "km-esdk": "in the client (AWS Encryption SDK; data key from the HSM through the KMS door)",
}
"""Where the AES of each target runs, as every report names it."""


class Operation(Protocol):
    """One target's encryption of one payload, opened in the thread that uses it."""

    items: int
    """Fields per operation (the batch size for ``km-batch``, else 1)."""

    def payload(self, size: int) -> Any:
        """A random payload of ``size``-byte blob(s)."""
        ...

    def encrypt(self, payload: Any) -> Any:
        """Encrypt the payload; what ``decrypt`` takes."""
        ...

    def decrypt(self, sealed: Any) -> Any:
        """Decrypt what ``encrypt`` returned; comparable with the payload."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@dataclass(frozen=True)
class TargetSpec:
    """A target as load processes receive it: its name, label and how to reach its service."""

    name: str
    label: str
    endpoint: Endpoint | None = None
    aws: AwsConfig | None = None
    batch: int = 100

    def open(self, size: int) -> Operation:
        """A fresh operation (its own connections) for blobs of ``size`` bytes."""
        if self.name in BOTO3_TARGETS:
            assert self.aws is not None
            return AwsField(self.aws) if size <= KMS_DIRECT_LIMIT else AwsEnvelope(self.aws)
        if self.name == "km-esdk":
            assert self.aws is not None
            return EncryptionSdk(self.aws)
        assert self.endpoint is not None
        km, key = self.endpoint.client(), self.endpoint.key
        if self.name == "km-batch":
            return KmBatch(km, key, self.batch)
        if self.name == "km-envelope":
            return KmEnvelope(km, key)
        return KmField(km, key) if size <= SMALL_LIMIT else KmStream(km, key)


class KmOperation:
    """Shared parts of the keymanager operations: one SDK client, single payloads."""

    items = 1

    def __init__(self, km: KeyManager, key: str) -> None:
        self.km, self.key = km, key

    def payload(self, size: int) -> Any:
        return os.urandom(size)

    def close(self) -> None:
        self.km.close()


class KmField(KmOperation):
    """``POST /v1/keys/{key}/encrypt`` and ``POST /v1/decrypt``."""

    def encrypt(self, payload: bytes) -> str:
        return self.km.encrypt(self.key, payload)

    def decrypt(self, sealed: str) -> bytes:
        return self.km.decrypt(sealed)


class KmStream(KmOperation):
    """On-board streaming: ``/encrypt/stream`` and ``/decrypt/stream``, memory to memory."""

    def encrypt(self, payload: bytes) -> bytes:
        out = io.BytesIO()
        self.km.encrypt_stream_onboard(self.key, io.BytesIO(payload), out)
        return out.getvalue()

    def decrypt(self, sealed: bytes) -> bytes:
        out = io.BytesIO()
        self.km.decrypt_stream_onboard(self.key, io.BytesIO(sealed), out)
        return out.getvalue()


class KmEnvelope(KmOperation):
    """The SDK's envelope streams: a data key from the service per blob, AES-256-GCM locally."""

    def encrypt(self, payload: bytes) -> bytes:
        out = io.BytesIO()
        self.km.encrypt_stream(self.key, io.BytesIO(payload), out)
        return out.getvalue()

    def decrypt(self, sealed: bytes) -> bytes:
        out = io.BytesIO()
        self.km.decrypt_stream(io.BytesIO(sealed), out)
        return out.getvalue()


class KmBatch(KmOperation):
    """``encrypt_many`` / ``decrypt_many`` of ``batch`` fields per operation; an item's error raises."""

    def __init__(self, km: KeyManager, key: str, batch: int) -> None:
        super().__init__(km, key)
        self.items = batch

    def payload(self, size: int) -> list[bytes]:
        return [os.urandom(size) for _ in range(self.items)]

    def encrypt(self, payload: list[bytes]) -> list[str]:
        return [unwrap(r).ciphertext for r in self.km.encrypt_many(self.key, payload)]

    def decrypt(self, sealed: list[str]) -> list[bytes]:
        return [unwrap(r) for r in self.km.decrypt_many(self.key, sealed)]


def unwrap(result: Any) -> Any:
    """A batch item's result, raising the ``APIError`` returned in its place."""
    if isinstance(result, APIError):
        raise result
    return result


class AwsField:
    """AWS KMS ``Encrypt`` / ``Decrypt`` of the payload itself (≤ 4 KB)."""

    items = 1

    def __init__(self, aws: AwsConfig) -> None:
        self.kms, self.key_id = aws.client(), aws.key_id

    def payload(self, size: int) -> bytes:
        return os.urandom(size)

    def encrypt(self, payload: bytes) -> bytes:
        return bytes(self.kms.encrypt(KeyId=self.key_id, Plaintext=payload)["CiphertextBlob"])

    def decrypt(self, sealed: bytes) -> bytes:
        return bytes(self.kms.decrypt(CiphertextBlob=sealed, KeyId=self.key_id)["Plaintext"])

    def close(self) -> None:
        self.kms.close()


class KmsDataKeys:
    """A ``DataKeyProvider`` backed by AWS KMS ``GenerateDataKey`` / ``Decrypt``."""

    def __init__(self, kms: Any, key_id: str) -> None:
        self.kms, self.key_id = kms, key_id

    def generate_data_key(self, context: Any) -> tuple[bytes, str]:
        answer = self.kms.generate_data_key(KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=context or {})
        return bytes(answer["Plaintext"]), base64.b64encode(answer["CiphertextBlob"]).decode()

    def decrypt_data_key(self, wrapped_key: str, context: Any) -> bytes:
        blob = base64.b64decode(wrapped_key)
        answer = self.kms.decrypt(CiphertextBlob=blob, KeyId=self.key_id, EncryptionContext=dict(context or {}))
        return bytes(answer["Plaintext"])


class AwsEnvelope(AwsField):
    """``GenerateDataKey`` per blob, then the same framed AES-256-GCM as ``km-envelope``."""

    def encrypt(self, payload: bytes) -> bytes:
        out = io.BytesIO()
        encrypt_envelope(KmsDataKeys(self.kms, self.key_id), io.BytesIO(payload), out)
        return out.getvalue()

    def decrypt(self, sealed: bytes) -> bytes:
        out = io.BytesIO()
        decrypt_envelope(KmsDataKeys(self.kms, self.key_id), io.BytesIO(sealed), out)
        return out.getvalue()


class EncryptionSdk:
    """The AWS Encryption SDK's ``encrypt`` / ``decrypt`` under a strict provider of one KMS key (its ARN).

    The SDK makes its own KMS clients from a botocore session: they sign with the config's access
    key, trust its CA and reach its endpoint through ``AWS_ENDPOINT_URL_KMS`` (set in this load
    process, which serves nothing else).
    """

    items = 1

    def __init__(self, aws: AwsConfig) -> None:
        import aws_encryption_sdk
        import botocore.session

        assert aws.endpoint_url is not None and aws.credentials is not None
        os.environ["AWS_ENDPOINT_URL_KMS"] = aws.endpoint_url
        session = botocore.session.Session()
        session.set_credentials(*aws.credentials)
        if aws.ca:
            session.set_config_variable("ca_bundle", aws.ca)
        self.keys = aws_encryption_sdk.StrictAwsKmsMasterKeyProvider(key_ids=[aws.key_id], botocore_session=session)
        policy = aws_encryption_sdk.CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT
        self.sdk = aws_encryption_sdk.EncryptionSDKClient(commitment_policy=policy)

    def payload(self, size: int) -> bytes:
        return os.urandom(size)

    def encrypt(self, payload: bytes) -> bytes:
        sealed, _ = self.sdk.encrypt(source=payload, key_provider=self.keys)
        return bytes(sealed)

    def decrypt(self, sealed: bytes) -> bytes:
        plain, _ = self.sdk.decrypt(source=sealed, key_provider=self.keys)
        return bytes(plain)

    def close(self) -> None:
        """Nothing to release: the SDK's clients close with the process."""
