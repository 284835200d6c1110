"""The KMS door's SYMMETRIC_DEFAULT follows the token (AES-GCM where it has CKM_AES_GCM, else
CBC-PAD + HMAC-SHA256 in the HSM) or ``KM_KMS_DEFAULT_ALGORITHM``; either way boto3 sees AWS's shape."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from tests.e2e.conftest import Server
from tests.kms_api.conftest import REGION, new_pair
from tests.support.server_pool import ServerPool


def _native_algorithm(server: Server, key_id: str) -> str:
    with server.client(server.admin_token) as admin:
        algorithm: str = admin.get(f"/v1/keys/{key_id}").json()["algorithm"]
        return algorithm


def _round_trip(kms: Any) -> str:
    key = kms.create_key(Description="default")["KeyMetadata"]
    assert (key["KeySpec"], key["EncryptionAlgorithms"]) == ("SYMMETRIC_DEFAULT", ["SYMMETRIC_DEFAULT"])
    blob = kms.encrypt(KeyId=key["KeyId"], Plaintext=b"4111111111111111")["CiphertextBlob"]
    assert kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b"4111111111111111"
    key_id: str = key["KeyId"]
    return key_id


def test_symmetric_default_is_the_best_scheme_the_token_has(kms_server: Server, admin_kms: Any) -> None:
    expected = "AES_256_GCM" if "AES_256_GCM" in kms_server.supported() else "AES_256_CBC_HMAC_SHA256"
    assert _native_algorithm(kms_server, _round_trip(admin_kms)) == expected


def test_the_setting_chooses_symmetric_default(server_pool: ServerPool) -> None:
    server = server_pool.get(workers=1, KM_KMS_DEFAULT_ALGORITHM="AES_256_CBC_HMAC_SHA256")
    pair = new_pair(server, "kms-default-admin", "admin")
    kms = boto3.client(
        "kms",
        endpoint_url=server.url,
        region_name=REGION,
        aws_access_key_id=pair.access_key_id,
        aws_secret_access_key=pair.secret_access_key,
        verify=str(server.ca),
        config=Config(retries={"max_attempts": 1}),
    )
    assert _native_algorithm(server, _round_trip(kms)) == "AES_256_CBC_HMAC_SHA256"
