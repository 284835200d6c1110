"""The unmodified AWS Encryption SDK (``aws-encryption-sdk`` from PyPI) through keys of ours.

The SDK builds its own KMS clients (``boto3.Session(botocore_session=…).client("kms", region_name=
<the ARN's region>)``): they reach the server through ``AWS_ENDPOINT_URL_KMS``, trust its CA through
the botocore session's ``ca_bundle`` and sign with the access key the session is given. The SDK
calls GenerateDataKey (``NumberOfBytes`` 32, the encryption context) to encrypt and Decrypt (the
blob, ``KeyId`` as the key's ARN, the encryption context) to decrypt.
"""

from __future__ import annotations

import os
from typing import Any

import aws_encryption_sdk
import botocore.session
import pytest
from aws_encryption_sdk import Algorithm, CommitmentPolicy, StrictAwsKmsMasterKeyProvider
from aws_encryption_sdk.exceptions import DecryptKeyError
from botocore.exceptions import ClientError
from cryptography.exceptions import InvalidTag

from tests.e2e.conftest import Server
from tests.kms_api.conftest import Pair

CONTEXT = {"tenant": "acme", "purpose": "esdk-round-trip"}


@pytest.fixture
def provider(
    kms_server: Server, admin_pair: Pair, admin_kms: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[StrictAwsKmsMasterKeyProvider, str]:
    """A strict master key provider of one new key of ours (by ARN), and that ARN."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", kms_server.url)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    session = botocore.session.Session()
    session.set_credentials(admin_pair.access_key_id, admin_pair.secret_access_key)
    session.set_config_variable("ca_bundle", str(kms_server.ca))
    arn: str = admin_kms.create_key(Description="esdk")["KeyMetadata"]["Arn"]
    return StrictAwsKmsMasterKeyProvider(key_ids=[arn], botocore_session=session), arn


@pytest.fixture(scope="module")
def client() -> aws_encryption_sdk.EncryptionSDKClient:
    return aws_encryption_sdk.EncryptionSDKClient(commitment_policy=CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT)


def test_ten_megabyte_round_trip_through_our_key(
    client: aws_encryption_sdk.EncryptionSDKClient,
    provider: tuple[StrictAwsKmsMasterKeyProvider, str],
    admin_kms: Any,
) -> None:
    keys, arn = provider
    message = os.urandom(10 * 1024 * 1024)
    sealed, header = client.encrypt(source=message, key_provider=keys, encryption_context=CONTEXT)
    assert message[:4096] not in sealed
    [data_key] = header.encrypted_data_keys
    assert data_key.key_provider.provider_id == "aws-kms" and data_key.key_provider.key_info == arn.encode()

    opened, read = client.decrypt(source=sealed, key_provider=keys)
    assert opened == message
    assert CONTEXT.items() <= read.encryption_context.items()

    # The wrapped data key is one of our blobs, bound to the whole encryption context the SDK sent.
    blob = data_key.encrypted_data_key
    unwrapped = admin_kms.decrypt(CiphertextBlob=blob, EncryptionContext=read.encryption_context)
    assert unwrapped["KeyId"] == arn and len(unwrapped["Plaintext"]) == 32
    with pytest.raises(ClientError) as refused:
        admin_kms.decrypt(CiphertextBlob=blob, EncryptionContext=CONTEXT)
    assert refused.value.response["Error"]["Code"] == "InvalidCiphertextException"


def test_tampered_messages_are_refused(
    client: aws_encryption_sdk.EncryptionSDKClient, provider: tuple[StrictAwsKmsMasterKeyProvider, str]
) -> None:
    keys, _ = provider
    sealed, header = client.encrypt(source=b"x" * 100_000, key_provider=keys, encryption_context=CONTEXT)
    [data_key] = header.encrypted_data_keys
    at = sealed.index(data_key.encrypted_data_key) + len(data_key.encrypted_data_key) // 2

    # One byte of our blob changed: the server refuses to unwrap it, the SDK has no data key.
    with pytest.raises(DecryptKeyError):
        client.decrypt(source=flipped(sealed, at), key_provider=keys)
    # One byte of the body changed: the data key unwraps, the frame's tag does not verify.
    with pytest.raises(InvalidTag):  # the SDK lets the AES-GCM failure through
        client.decrypt(source=flipped(sealed, len(sealed) // 2), key_provider=keys)
    assert client.decrypt(source=sealed, key_provider=keys)[0] == b"x" * 100_000


@pytest.mark.parametrize(
    "suite",
    [
        Algorithm.AES_128_GCM_IV12_TAG16_HKDF_SHA256,
        Algorithm.AES_192_GCM_IV12_TAG16_HKDF_SHA384_ECDSA_P384,
        Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY,
    ],
)
def test_every_data_key_size_the_sdk_asks_for(
    suite: Algorithm, provider: tuple[StrictAwsKmsMasterKeyProvider, str]
) -> None:
    """The legacy suites ask GenerateDataKey for 16 and 24 bytes (their key sizes), the committing ones 32."""
    keys, _ = provider
    legacy = aws_encryption_sdk.EncryptionSDKClient(commitment_policy=CommitmentPolicy.FORBID_ENCRYPT_ALLOW_DECRYPT)
    policy = CommitmentPolicy.REQUIRE_ENCRYPT_ALLOW_DECRYPT if suite.is_committing() else None
    client = aws_encryption_sdk.EncryptionSDKClient(commitment_policy=policy) if policy else legacy
    sealed, header = client.encrypt(source=b"sized", key_provider=keys, algorithm=suite, encryption_context=CONTEXT)
    assert header.algorithm is suite
    assert client.decrypt(source=sealed, key_provider=keys)[0] == b"sized"


def flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]
