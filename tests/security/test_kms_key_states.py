"""Every key state through the KMS door, and an imported key through its operations (issue 20, item 8).

The finding: a key waiting for imported material answered 500 on the KMS door (``_STATES`` had
no ``PendingImport``, ``_AWS_CODES`` no row for the key-pending-import error, ``Origin`` was
always ``AWS_KMS``). The bound: a key in each state of ``KeyState`` (and of each ``Origin``)
through every KMS operation that names a key answers below 500 — its ``KeyState`` and ``Origin``
as AWS words them, a use of an unusable key the AWS error for its state — and an imported key
goes through DescribeKey, Encrypt, Decrypt, ReEncrypt and GenerateDataKey, against a real server.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from keymanager.domain.models import KeyState
from keymanager.hsm.import_parameters import ImportParameters, WrappingAlgorithm
from tests.hsm.test_key_import import wrap
from tests.security.conftest import Pair, Server

ADMIN = "security-admin"
POLICY = {op: [ADMIN] for op in ("encrypt", "decrypt", "generate_data_key", "reencrypt")}
AWS_STATE = {
    KeyState.ENABLED: "Enabled",
    KeyState.DISABLED: "Disabled",
    KeyState.PENDING_DELETION: "PendingDeletion",
    KeyState.DESTROYED: "Unavailable",
    KeyState.PENDING_IMPORT: "PendingImport",
}
USE_REFUSAL = {
    KeyState.DISABLED: "DisabledException",
    KeyState.PENDING_DELETION: "KMSInvalidStateException",
    KeyState.DESTROYED: "KMSInvalidStateException",
    KeyState.PENDING_IMPORT: "KMSInvalidStateException",
}


@pytest.fixture(scope="module")
def admin(kms_door: Server) -> Iterator[httpx.Client]:
    with kms_door.client(kms_door.admin_token) as client:
        yield client


@pytest.fixture(scope="module")
def admin_kms(kms_door: Server, kms_admin: Pair) -> Any:
    return boto3.client(
        "kms",
        endpoint_url=kms_door.url,
        region_name="eu-west-1",
        aws_access_key_id=kms_admin.access_key_id,
        aws_secret_access_key=kms_admin.secret_access_key,
        verify=str(kms_door.ca),
        config=Config(retries={"max_attempts": 1}),
    )


def new_key(admin: httpx.Client, name: str, **extra: Any) -> str:
    made = admin.post("/v1/keys", json={"name": name, "algorithm": "AES_256_GCM", "policy": POLICY, **extra})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def import_material(admin: httpx.Client, key: str, material: bytes) -> httpx.Response:
    wrapping = WrappingAlgorithm.RSAES_OAEP_SHA_1
    got = admin.post(f"/v1/keys/{key}/import-parameters", json={"wrapping_algorithm": wrapping.value})
    assert got.status_code == 200, got.text
    params = ImportParameters(base64.b64decode(got.json()["public_key"]), got.json()["import_token"], 0)
    wrapped = base64.b64encode(wrap(params, wrapping, material)).decode()
    body = {"import_token": params.import_token, "encrypted_key_material": wrapped}
    return admin.post(f"/v1/keys/{key}/import", json=body)


def state_of(admin: httpx.Client, key: str) -> KeyState:
    return KeyState(admin.get(f"/v1/keys/{key}").json()["state"])


def key_in(admin: httpx.Client, admin_kms: Any, state: KeyState) -> tuple[str, bytes | None]:
    """A key in ``state`` and, unless it never had material, a blob it sealed while enabled."""
    if state is KeyState.PENDING_IMPORT:
        return new_key(admin, f"state-{state.value}", origin="external"), None
    key = new_key(admin, f"state-{state.value}")
    blob: bytes = admin_kms.encrypt(KeyId=key, Plaintext=b"4111")["CiphertextBlob"]
    if state is KeyState.DISABLED:
        assert admin.patch(f"/v1/keys/{key}", json={"enabled": False}).status_code == 200
    elif state in (KeyState.PENDING_DELETION, KeyState.DESTROYED):
        days = 0 if state is KeyState.DESTROYED else 7
        assert admin.delete(f"/v1/keys/{key}", params={"pending_days": days}).status_code == 200
    deadline = time.monotonic() + 30
    while state_of(admin, key) is not state and time.monotonic() < deadline:
        time.sleep(0.2)  # the maintenance round destroys a key whose day has come
    assert state_of(admin, key) is state
    return key, blob


def operations(key: str, blob: bytes | None) -> dict[str, Callable[[Any], Any]]:
    """Every KMS operation naming ``key`` that leaves its state as it is."""
    sealed = blob or b"\x00" * 64
    return {
        "DescribeKey": lambda kms: kms.describe_key(KeyId=key),
        "Encrypt": lambda kms: kms.encrypt(KeyId=key, Plaintext=b"4111"),
        "Decrypt": lambda kms: kms.decrypt(CiphertextBlob=sealed, KeyId=key),
        "ReEncrypt": lambda kms: kms.re_encrypt(CiphertextBlob=sealed, DestinationKeyId=key),
        "GenerateDataKey": lambda kms: kms.generate_data_key(KeyId=key, KeySpec="AES_256"),
        "GenerateDataKeyWithoutPlaintext": lambda kms: kms.generate_data_key_without_plaintext(
            KeyId=key, NumberOfBytes=32
        ),
        "GetKeyRotationStatus": lambda kms: kms.get_key_rotation_status(KeyId=key),
        "ListKeyRotations": lambda kms: kms.list_key_rotations(KeyId=key),
        "GetKeyPolicy": lambda kms: kms.get_key_policy(KeyId=key, PolicyName="default"),
        "ListKeyPolicies": lambda kms: kms.list_key_policies(KeyId=key),
        "ListResourceTags": lambda kms: kms.list_resource_tags(KeyId=key),
        "ListGrants": lambda kms: kms.list_grants(KeyId=key),
        "ListAliases": lambda kms: kms.list_aliases(KeyId=key),
        "ListKeys": lambda kms: kms.list_keys(),
        "EnableKeyRotation": lambda kms: kms.enable_key_rotation(KeyId=key),
        "UpdateKeyDescription": lambda kms: kms.update_key_description(KeyId=key, Description="walked"),
        "TagResource": lambda kms: kms.tag_resource(KeyId=key, Tags=[{"TagKey": "walk", "TagValue": "1"}]),
    }


def answer(call: Callable[[Any], Any], kms: Any) -> tuple[int, str]:
    """HTTP status and AWS error (``""`` for a success) of one call."""
    try:
        call(kms)
    except ClientError as exc:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"]), str(exc.response["Error"]["Code"])
    return 200, ""


@pytest.mark.parametrize("state", list(KeyState), ids=lambda s: s.value)
def test_every_key_state_through_every_kms_operation(admin: httpx.Client, admin_kms: Any, state: KeyState) -> None:
    key, blob = key_in(admin, admin_kms, state)
    metadata = admin_kms.describe_key(KeyId=key)["KeyMetadata"]
    assert metadata["KeyState"] == AWS_STATE[state] and metadata["Enabled"] is (state is KeyState.ENABLED)
    assert metadata["Origin"] == ("EXTERNAL" if state is KeyState.PENDING_IMPORT else "AWS_KMS")
    answers = {name: answer(call, admin_kms) for name, call in operations(key, blob).items()}
    assert all(status < 500 for status, _ in answers.values()), answers
    if state is not KeyState.ENABLED:
        assert answers["Encrypt"] == (400, USE_REFUSAL[state]), answers
        assert answers["GenerateDataKey"] == (400, USE_REFUSAL[state]), answers
    assert state_of(admin, key) is state


def test_enabling_a_key_waiting_for_material_is_refused(admin: httpx.Client, admin_kms: Any) -> None:
    key = new_key(admin, "enable-pending", origin="external")
    for call in (admin_kms.enable_key, admin_kms.disable_key, admin_kms.enable_key_rotation):
        status, code = answer(lambda kms, call=call: call(KeyId=key), admin_kms)
        assert status < 500 and code == "KMSInvalidStateException", (call, status, code)
    assert state_of(admin, key) is KeyState.PENDING_IMPORT


def test_an_imported_key_through_the_kms_door(admin: httpx.Client, admin_kms: Any) -> None:
    key = new_key(admin, "imported", origin="external")
    assert import_material(admin, key, bytes(range(32))).status_code == 200
    metadata = admin_kms.describe_key(KeyId=key)["KeyMetadata"]
    assert (metadata["KeyState"], metadata["Origin"], metadata["Enabled"]) == ("Enabled", "EXTERNAL", True)
    blob = admin_kms.encrypt(KeyId=key, Plaintext=b"4111", EncryptionContext={"t": "1"})["CiphertextBlob"]
    opened = admin_kms.decrypt(CiphertextBlob=blob, EncryptionContext={"t": "1"})
    assert opened["Plaintext"] == b"4111" and opened["KeyId"].endswith(key)
    other = new_key(admin, "imported-destination")
    moved = admin_kms.re_encrypt(CiphertextBlob=blob, SourceEncryptionContext={"t": "1"}, DestinationKeyId=other)
    assert admin_kms.decrypt(CiphertextBlob=moved["CiphertextBlob"])["Plaintext"] == b"4111"
    back = admin_kms.re_encrypt(CiphertextBlob=moved["CiphertextBlob"], DestinationKeyId=key)
    assert back["KeyId"].endswith(key)
    data_key = admin_kms.generate_data_key(KeyId=key, KeySpec="AES_256")
    assert admin_kms.decrypt(CiphertextBlob=data_key["CiphertextBlob"])["Plaintext"] == data_key["Plaintext"]
