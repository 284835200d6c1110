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
    ("Sign", lambda key: {"KeyId": key, "Message": b"m", "SigningAlgorithm": "ECDSA_SHA_256"}, (UNSUPPORTED,) * 3),
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
