"""The unmodified AWS Encryption SDK with the Material Providers Library (``aws-encryption-sdk`` and
``aws-cryptographic-material-providers`` from PyPI): messages round-trip through an AWS KMS RSA
keyring and an AWS KMS ECDH keyring on asymmetric keys of ours.

The RSA keyring wraps each data key with the public key GetPublicKey gave (in the SDK) and unwraps
it with Decrypt (``KeyId``, ``EncryptionAlgorithm``: in the HSM). The ECDH keyring's sender derives
the shared secret with DeriveSharedSecret (the sender's key of ours and the recipient's public key);
the recipient, found by ``KmsPublicKeyDiscovery``, derives it with its own key of ours and the
sender's public key the message carries.
"""

from __future__ import annotations

import os
from typing import Any

import aws_encryption_sdk
import pytest
from aws_cryptographic_material_providers.mpl import AwsCryptographicMaterialProviders
from aws_cryptographic_material_providers.mpl.config import MaterialProvidersConfig
from aws_cryptographic_material_providers.mpl.models import (
    CreateAwsKmsEcdhKeyringInput,
    CreateAwsKmsRsaKeyringInput,
    KmsEcdhStaticConfigurationsKmsPrivateKeyToStaticPublicKey,
    KmsEcdhStaticConfigurationsKmsPublicKeyDiscovery,
    KmsPrivateKeyToStaticPublicKeyInput,
    KmsPublicKeyDiscoveryInput,
)
from aws_encryption_sdk import Algorithm, CommitmentPolicy
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import serialization

from tests.kms_api.conftest import KmsFactory, Pair

CONTEXT = {"tenant": "acme", "purpose": "esdk-keyrings"}
SUITE = Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY
"""A committing suite without a message signature (the RSA keyring takes no signing suite)."""


@pytest.fixture(scope="module")
def mpl() -> AwsCryptographicMaterialProviders:
    return AwsCryptographicMaterialProviders(config=MaterialProvidersConfig())


@pytest.fixture(scope="module")
def client() -> aws_encryption_sdk.EncryptionSDKClient:
    return aws_encryption_sdk.EncryptionSDKClient(commitment_policy=CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT)


@pytest.fixture(scope="module")
def kms(kms_client: KmsFactory, admin_pair: Pair) -> Any:
    """The boto3 client the keyrings call (the Material Providers Library takes one as it is)."""
    return kms_client(admin_pair)


def oaep_algorithm(kms: Any, key_id: str) -> str:
    """RSAES_OAEP_SHA_256 where this HSM decrypts it, else RSAES_OAEP_SHA_1 (SoftHSM 2.6.1 refuses
    OAEP with SHA-256: Encrypt says so by name, UnsupportedOperationException)."""
    try:
        kms.encrypt(KeyId=key_id, Plaintext=b"probe", EncryptionAlgorithm="RSAES_OAEP_SHA_256")
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "UnsupportedOperationException"
        return "RSAES_OAEP_SHA_1"
    return "RSAES_OAEP_SHA_256"


def test_a_message_round_trips_through_an_aws_kms_rsa_keyring(
    mpl: AwsCryptographicMaterialProviders, client: aws_encryption_sdk.EncryptionSDKClient, kms: Any
) -> None:
    key = kms.create_key(KeySpec="RSA_2048", KeyUsage="ENCRYPT_DECRYPT", Description="esdk rsa")["KeyMetadata"]
    algorithm = oaep_algorithm(kms, key["KeyId"])
    spki = kms.get_public_key(KeyId=key["Arn"])["PublicKey"]
    pem = serialization.load_der_public_key(spki).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    keyring = mpl.create_aws_kms_rsa_keyring(
        input=CreateAwsKmsRsaKeyringInput(
            public_key=pem, kms_key_id=key["Arn"], encryption_algorithm=algorithm, kms_client=kms
        )
    )
    message = os.urandom(1024 * 1024)
    sealed, header = client.encrypt(source=message, keyring=keyring, encryption_context=CONTEXT, algorithm=SUITE)
    assert message[:4096] not in sealed
    [data_key] = header.encrypted_data_keys
    assert data_key.key_provider.provider_id == "aws-kms-rsa" and data_key.key_provider.key_info == key["Arn"].encode()
    assert len(data_key.encrypted_data_key) == 256  # a raw OAEP ciphertext under our RSA key
    opened, read = client.decrypt(source=sealed, keyring=keyring)
    assert opened == message and CONTEXT.items() <= read.encryption_context.items()
    # a keyring of another RSA key of ours cannot open it
    other = kms.create_key(KeySpec="RSA_2048", KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]
    stranger = mpl.create_aws_kms_rsa_keyring(
        input=CreateAwsKmsRsaKeyringInput(kms_key_id=other["Arn"], encryption_algorithm=algorithm, kms_client=kms)
    )
    with pytest.raises(Exception):  # noqa: B017 (the library's own error class for "no data key")
        client.decrypt(source=sealed, keyring=stranger)


def test_a_message_round_trips_through_an_aws_kms_ecdh_keyring(
    mpl: AwsCryptographicMaterialProviders, client: aws_encryption_sdk.EncryptionSDKClient, kms: Any
) -> None:
    sender, recipient = (
        kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="KEY_AGREEMENT", Description=f"esdk ecdh {who}")["KeyMetadata"]
        for who in ("sender", "recipient")
    )
    recipient_public = kms.get_public_key(KeyId=recipient["Arn"])["PublicKey"]
    sending = mpl.create_aws_kms_ecdh_keyring(
        input=CreateAwsKmsEcdhKeyringInput(
            key_agreement_scheme=KmsEcdhStaticConfigurationsKmsPrivateKeyToStaticPublicKey(
                KmsPrivateKeyToStaticPublicKeyInput(
                    sender_kms_identifier=sender["Arn"], recipient_public_key=recipient_public
                )
            ),
            curve_spec="ECC_NIST_P256",
            kms_client=kms,
        )
    )
    message = os.urandom(256 * 1024)
    sealed, header = client.encrypt(source=message, keyring=sending, encryption_context=CONTEXT)
    assert message[:4096] not in sealed and len(header.encrypted_data_keys) == 1
    receiving = mpl.create_aws_kms_ecdh_keyring(
        input=CreateAwsKmsEcdhKeyringInput(
            key_agreement_scheme=KmsEcdhStaticConfigurationsKmsPublicKeyDiscovery(
                KmsPublicKeyDiscoveryInput(recipient_kms_identifier=recipient["Arn"])
            ),
            curve_spec="ECC_NIST_P256",
            kms_client=kms,
        )
    )
    opened, read = client.decrypt(source=sealed, keyring=receiving)
    assert opened == message and CONTEXT.items() <= read.encryption_context.items()
    assert client.decrypt(source=sealed, keyring=sending)[0] == message  # the sender opens it too
    # another key of ours, discovering, is not the recipient: no data key for it
    stranger = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="KEY_AGREEMENT")["KeyMetadata"]
    discovering = mpl.create_aws_kms_ecdh_keyring(
        input=CreateAwsKmsEcdhKeyringInput(
            key_agreement_scheme=KmsEcdhStaticConfigurationsKmsPublicKeyDiscovery(
                KmsPublicKeyDiscoveryInput(recipient_kms_identifier=stranger["Arn"])
            ),
            curve_spec="ECC_NIST_P256",
            kms_client=kms,
        )
    )
    with pytest.raises(Exception):  # noqa: B017 (the library's own error class for "no data key")
        client.decrypt(source=sealed, keyring=discovering)
