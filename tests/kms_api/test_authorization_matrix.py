"""Who may do what through the AWS KMS API: every served operation's answer to each role.

The key ``matrix`` is made by the admin with CreateKey (so its policy names the admin only);
app and auditor callers are refused every management operation and every use of that key, and
the operations open to every role (ListKeys, ListAliases) answer them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore import xform_name
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.e2e.conftest import Server
from tests.kms_api.conftest import KmsFactory, Pair, new_pair

OK = "ok"
DENIED = "AccessDeniedException"
UNSUPPORTED = "UnsupportedOperationException"
Params = Callable[[str], dict[str, Any]]

# operation, its parameters (given the key id), answers of app, auditor, admin
MATRIX: list[tuple[str, Params, tuple[str, str, str]]] = [
    ("ListKeys", lambda key: {}, (OK, OK, OK)),
    ("ListAliases", lambda key: {}, (OK, OK, OK)),
    ("DescribeKey", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("Encrypt", lambda key: {"KeyId": key, "Plaintext": b"x"}, (DENIED, DENIED, OK)),
    ("GenerateDataKey", lambda key: {"KeyId": key, "KeySpec": "AES_256"}, (DENIED, DENIED, OK)),
    ("GenerateDataKeyPair", lambda key: {"KeyId": key, "KeyPairSpec": "ECC_NIST_P256"}, (DENIED, DENIED, OK)),
    (
        "GenerateDataKeyPairWithoutPlaintext",
        lambda key: {"KeyId": key, "KeyPairSpec": "ECC_NIST_P256"},
        (DENIED, DENIED, OK),
    ),
    ("GenerateRandom", lambda key: {"NumberOfBytes": 16}, (OK, DENIED, OK)),
    ("CreateKey", lambda key: {"Description": "matrix"}, (DENIED, DENIED, OK)),
    ("GetKeyRotationStatus", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("ListKeyRotations", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("GetKeyPolicy", lambda key: {"KeyId": key, "PolicyName": "default"}, (DENIED, DENIED, OK)),
    ("ListKeyPolicies", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("ListResourceTags", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("ListGrants", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("UpdateKeyDescription", lambda key: {"KeyId": key, "Description": "d"}, (DENIED, DENIED, OK)),
    ("TagResource", lambda key: {"KeyId": key, "Tags": [{"TagKey": "k", "TagValue": "v"}]}, (DENIED, DENIED, OK)),
    ("UntagResource", lambda key: {"KeyId": key, "TagKeys": ["k"]}, (DENIED, DENIED, OK)),
    ("EnableKeyRotation", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("DisableKeyRotation", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("RotateKeyOnDemand", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("CreateAlias", lambda key: {"AliasName": "alias/matrix", "TargetKeyId": key}, (DENIED, DENIED, OK)),
    ("UpdateAlias", lambda key: {"AliasName": "alias/matrix", "TargetKeyId": key}, (DENIED, DENIED, OK)),
    ("DeleteAlias", lambda key: {"AliasName": "alias/matrix"}, (DENIED, DENIED, OK)),
    ("DisableKey", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("EnableKey", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("ScheduleKeyDeletion", lambda key: {"KeyId": key, "PendingWindowInDays": 7}, (DENIED, DENIED, OK)),
    ("CancelKeyDeletion", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    (
        "Decapsulate",
        lambda key: {"KeyId": key, "SharedSecretCiphertextBlob": b"c", "EncapsulationAlgorithm": "ML_KEM"},
        (UNSUPPORTED,) * 3,
    ),
]
ECDSA = {"SigningAlgorithm": "ECDSA_SHA_256", "Message": b"m"}
PEER = (
    ec.generate_private_key(ec.SECP256R1())
    .public_key()
    .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
)
# the same for keys of the other usages, made by the admin (their policies name the admin only)
ASYMMETRIC: list[tuple[str, str, Params, tuple[str, str, str]]] = [
    ("SIGN_VERIFY", "Sign", lambda key: {"KeyId": key, **ECDSA}, (DENIED, DENIED, OK)),
    ("SIGN_VERIFY", "GetPublicKey", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("KEY_AGREEMENT", "GetPublicKey", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    (
        "KEY_AGREEMENT",
        "DeriveSharedSecret",
        lambda key: {"KeyId": key, "KeyAgreementAlgorithm": "ECDH", "PublicKey": PEER},
        (DENIED, DENIED, OK),
    ),
    ("SIGN_VERIFY", "DescribeKey", lambda key: {"KeyId": key}, (DENIED, DENIED, OK)),
    ("SIGN_VERIFY", "EnableKeyRotation", lambda key: {"KeyId": key}, (DENIED, DENIED, UNSUPPORTED)),
]


def _answer(client: Any, operation: str, params: dict[str, Any]) -> str:
    try:
        getattr(client, xform_name(operation))(**params)
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    return OK


@pytest.fixture(scope="module")
def auditor_pair(kms_server: Server) -> Pair:
    return new_pair(kms_server, "kms-matrix-auditor", "auditor")


def test_every_operation_answers_each_role_as_before(
    kms_client: KmsFactory, admin_kms: Any, app_kms: Any, auditor_pair: Pair
) -> None:
    clients = (app_kms, kms_client(auditor_pair), admin_kms)
    key = admin_kms.create_key(Description="the matrix's key")["KeyMetadata"]["KeyId"]
    for operation, params, expected in MATRIX:
        answers = tuple(_answer(client, operation, params(key)) for client in clients)
        assert answers == expected, operation


def test_every_asymmetric_operation_answers_each_role(
    kms_client: KmsFactory, admin_kms: Any, app_kms: Any, auditor_pair: Pair
) -> None:
    clients = (app_kms, kms_client(auditor_pair), admin_kms)
    keys = {
        usage: admin_kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage=usage)["KeyMetadata"]["KeyId"]
        for usage in ("SIGN_VERIFY", "KEY_AGREEMENT")
    }
    for usage, operation, params, expected in ASYMMETRIC:
        answers = tuple(_answer(client, operation, params(keys[usage])) for client in clients)
        assert answers == expected, operation
    signature = admin_kms.sign(KeyId=keys["SIGN_VERIFY"], **ECDSA)["Signature"]
    request = {"KeyId": keys["SIGN_VERIFY"], "Signature": signature, **ECDSA}
    assert tuple(_answer(client, "Verify", request) for client in clients) == (DENIED, DENIED, OK)
