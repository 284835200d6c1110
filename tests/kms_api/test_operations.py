"""Every supported operation through unmodified boto3: success and refusal paths."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import Server
from tests.kms_api.conftest import ACCOUNT, REGION, KmsFactory, Pair


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def grant(server: Server, key_id: str, **policy: list[str]) -> None:
    with server.client(server.admin_token) as admin:
        answer = admin.patch(f"/v1/keys/{key_id}", json={"policy": policy})
        assert answer.status_code == 200, answer.text


@pytest.fixture
def key(admin_kms: Any) -> dict[str, Any]:
    return admin_kms.create_key(Description="ops")["KeyMetadata"]  # type: ignore[no-any-return]


def test_create_key_describes_a_symmetric_default_key(admin_kms: Any, key: dict[str, Any]) -> None:
    assert key["KeySpec"] == key["CustomerMasterKeySpec"] == "SYMMETRIC_DEFAULT"
    assert key["KeyUsage"] == "ENCRYPT_DECRYPT" and key["KeyState"] == "Enabled" and key["Enabled"] is True
    assert key["Arn"] == f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key['KeyId']}"
    assert key["Description"] == "ops"
    described = admin_kms.describe_key(KeyId=key["Arn"])["KeyMetadata"]
    assert described["KeyId"] == key["KeyId"] and described["EncryptionAlgorithms"] == ["SYMMETRIC_DEFAULT"]


@pytest.mark.parametrize("spec", ["RSA_1024", "HMAC_1024", "SM2", "ML_DSA_44"])
def test_other_key_specs_are_unsupported_by_name(admin_kms: Any, spec: str) -> None:
    with pytest.raises(ClientError) as refused:
        admin_kms.create_key(KeySpec=spec)
    assert code(refused) == "UnsupportedOperationException" and spec in str(refused.value)


def test_management_needs_the_admin_role(app_kms: Any, key: dict[str, Any]) -> None:
    for call in (
        lambda: app_kms.create_key(),
        lambda: app_kms.disable_key(KeyId=key["KeyId"]),
        lambda: app_kms.schedule_key_deletion(KeyId=key["KeyId"], PendingWindowInDays=7),
        lambda: app_kms.create_alias(AliasName="alias/app-made", TargetKeyId=key["KeyId"]),
        lambda: app_kms.enable_key_rotation(KeyId=key["KeyId"]),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert code(refused) == "AccessDeniedException"


def test_key_ids_arns_aliases_and_alias_arns_name_the_same_key(admin_kms: Any, key: dict[str, Any]) -> None:
    admin_kms.create_alias(AliasName="alias/ops-refs", TargetKeyId=key["KeyId"])
    uuid = key["KeyId"]
    dashed = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}"
    alias_arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:alias/ops-refs"
    for ref in (uuid, dashed, key["Arn"], "alias/ops-refs", alias_arn):
        assert admin_kms.describe_key(KeyId=ref)["KeyMetadata"]["KeyId"] == uuid
    for ref in ("alias/nothing-here", f"arn:aws:kms:{REGION}:999999999999:key/{uuid}", "0" * 32, "not-a-key"):
        with pytest.raises(ClientError) as refused:
            admin_kms.describe_key(KeyId=ref)
        assert code(refused) == "NotFoundException"


def test_encrypt_decrypt_with_context_and_key_id(admin_kms: Any, kms_server: Server, key: dict[str, Any]) -> None:
    context = {"purpose": "test", "tenant": "7"}
    sealed = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"x" * 4096, EncryptionContext=context)
    assert sealed["KeyId"] == key["Arn"] and sealed["EncryptionAlgorithm"] == "SYMMETRIC_DEFAULT"
    blob = sealed["CiphertextBlob"]
    scheme = b"\x02" if "AES_256_GCM" in kms_server.supported() else b"\x01"  # docs/kms-api.md: 2 GCM, 1 CBC+HMAC
    assert blob[:4] == b"km\x01" + scheme and bytes.fromhex(key["KeyId"]) == blob[4:20]
    opened = admin_kms.decrypt(CiphertextBlob=blob, KeyId=key["Arn"], EncryptionContext=context)
    assert opened["Plaintext"] == b"x" * 4096
    with pytest.raises(ClientError) as refused:
        admin_kms.decrypt(CiphertextBlob=blob, EncryptionContext={"purpose": "other"})
    assert code(refused) == "InvalidCiphertextException"
    with pytest.raises(ClientError) as refused:
        admin_kms.decrypt(CiphertextBlob=blob)
    assert code(refused) == "InvalidCiphertextException"


def test_plaintext_bounds(admin_kms: Any, key: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as refused:
        admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"x" * 4097)
    assert code(refused) == "ValidationException"


def test_policies_mean_what_they_say(
    admin_kms: Any, app_kms: Any, app_pair: Pair, kms_server: Server, key: dict[str, Any]
) -> None:
    other = admin_kms.create_key()["KeyMetadata"]
    blob = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"secret")["CiphertextBlob"]
    for call in (
        lambda: app_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a"),
        lambda: app_kms.decrypt(CiphertextBlob=blob),
        lambda: app_kms.generate_data_key(KeyId=key["KeyId"], KeySpec="AES_256"),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert code(refused) == "AccessDeniedException"
    grant(kms_server, key["KeyId"], encrypt=[app_pair.principal])
    assert app_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a")["KeyId"] == key["Arn"]
    with pytest.raises(ClientError) as refused:
        app_kms.decrypt(CiphertextBlob=blob)
    assert code(refused) == "AccessDeniedException"
    grant(kms_server, key["KeyId"], decrypt=[app_pair.principal], generate_data_key=[app_pair.principal])
    assert app_kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b"secret"
    assert len(app_kms.generate_data_key(KeyId=key["KeyId"], NumberOfBytes=32)["Plaintext"]) == 32
    # ReEncrypt: decrypt on the source, encrypt on the destination.
    with pytest.raises(ClientError) as refused:
        app_kms.re_encrypt(CiphertextBlob=blob, DestinationKeyId=other["KeyId"])
    assert code(refused) == "AccessDeniedException"
    grant(kms_server, other["KeyId"], encrypt=[app_pair.principal], decrypt=["kms-admin"])
    moved = app_kms.re_encrypt(CiphertextBlob=blob, DestinationKeyId=other["KeyId"])
    assert moved["SourceKeyId"] == key["Arn"] and moved["KeyId"] == other["Arn"]
    assert admin_kms.decrypt(CiphertextBlob=moved["CiphertextBlob"])["Plaintext"] == b"secret"
    # An app sees only the keys it may use.
    listed = {k["KeyId"] for k in app_kms.list_keys(Limit=1000)["Keys"]}
    assert {key["KeyId"], other["KeyId"]} <= listed
    assert admin_kms.create_key()["KeyMetadata"]["KeyId"] not in {
        k["KeyId"] for k in app_kms.list_keys(Limit=1000)["Keys"]
    }


def test_reencrypt_with_contexts(admin_kms: Any, key: dict[str, Any]) -> None:
    other = admin_kms.create_key()["KeyMetadata"]
    blob = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"p", EncryptionContext={"a": "1"})["CiphertextBlob"]
    moved = admin_kms.re_encrypt(
        CiphertextBlob=blob,
        SourceEncryptionContext={"a": "1"},
        DestinationKeyId=f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{other['KeyId']}",
        DestinationEncryptionContext={"b": "2"},
    )
    opened = admin_kms.decrypt(CiphertextBlob=moved["CiphertextBlob"], EncryptionContext={"b": "2"})
    assert opened["Plaintext"] == b"p" and opened["KeyId"] == other["Arn"]
    with pytest.raises(ClientError) as refused:
        admin_kms.re_encrypt(CiphertextBlob=blob, DestinationKeyId=other["KeyId"])
    assert code(refused) == "InvalidCiphertextException"


def test_generate_data_key_variants(admin_kms: Any, key: dict[str, Any]) -> None:
    made = admin_kms.generate_data_key(KeyId=key["KeyId"], KeySpec="AES_128", EncryptionContext={"c": "d"})
    assert len(made["Plaintext"]) == 16
    opened = admin_kms.decrypt(CiphertextBlob=made["CiphertextBlob"], EncryptionContext={"c": "d"})
    assert opened["Plaintext"] == made["Plaintext"]
    bare = admin_kms.generate_data_key_without_plaintext(KeyId=key["KeyId"], KeySpec="AES_256")
    assert "Plaintext" not in bare
    assert len(admin_kms.decrypt(CiphertextBlob=bare["CiphertextBlob"])["Plaintext"]) == 32
    for kwargs in ({}, {"KeySpec": "AES_256", "NumberOfBytes": 32}, {"KeySpec": "AES_512"}):
        with pytest.raises(ClientError) as refused:
            admin_kms.generate_data_key(KeyId=key["KeyId"], **kwargs)
        assert code(refused) == "ValidationException"


@pytest.mark.parametrize("count", [1, 7, 24, 64, 1024])
def test_generate_data_key_number_of_bytes_from_1_to_1024(admin_kms: Any, key: dict[str, Any], count: int) -> None:
    made = admin_kms.generate_data_key(KeyId=key["KeyId"], NumberOfBytes=count, EncryptionContext={"n": str(count)})
    assert len(made["Plaintext"]) == count
    opened = admin_kms.decrypt(CiphertextBlob=made["CiphertextBlob"], EncryptionContext={"n": str(count)})
    assert opened["Plaintext"] == made["Plaintext"]
    bare = admin_kms.generate_data_key_without_plaintext(KeyId=key["KeyId"], NumberOfBytes=count)
    assert "Plaintext" not in bare
    assert len(admin_kms.decrypt(CiphertextBlob=bare["CiphertextBlob"])["Plaintext"]) == count


def test_generate_data_key_number_of_bytes_out_of_bounds(
    kms_client: KmsFactory, admin_pair: Pair, key: dict[str, Any]
) -> None:
    unchecked = kms_client(admin_pair, parameter_validation=False)  # boto3 checks the lower bound itself
    for operation in (unchecked.generate_data_key, unchecked.generate_data_key_without_plaintext):
        for count in (0, -1, 1025):
            with pytest.raises(ClientError) as refused:
                operation(KeyId=key["KeyId"], NumberOfBytes=count)
            assert code(refused) == "ValidationException" and "NumberOfBytes" in str(refused.value)
        for kwargs in ({}, {"KeySpec": "AES_128", "NumberOfBytes": 16}):
            with pytest.raises(ClientError) as refused:
                operation(KeyId=key["KeyId"], **kwargs)
            assert code(refused) == "ValidationException" and "either number of bytes or key spec" in str(refused.value)


def test_generate_random(admin_kms: Any) -> None:
    assert len(admin_kms.generate_random(NumberOfBytes=1024)["Plaintext"]) == 1024
    with pytest.raises(ClientError) as refused:
        admin_kms.generate_random(NumberOfBytes=1025)
    assert code(refused) == "ValidationException"


def test_aliases(admin_kms: Any, key: dict[str, Any], kms_server: Server) -> None:
    other = admin_kms.create_key()["KeyMetadata"]
    admin_kms.create_alias(AliasName="alias/ops-billing", TargetKeyId=key["KeyId"])
    with pytest.raises(ClientError) as refused:
        admin_kms.create_alias(AliasName="alias/ops-billing", TargetKeyId=other["KeyId"])
    assert code(refused) == "AlreadyExistsException"
    with pytest.raises(ClientError) as refused:
        admin_kms.create_alias(AliasName="alias/aws/reserved", TargetKeyId=other["KeyId"])
    assert code(refused) == "NotAuthorizedException"
    # The first alias is the key's name in the REST API.
    with kms_server.client(kms_server.admin_token) as admin:
        assert admin.get("/v1/keys/ops-billing").json()["id"] == key["KeyId"]
    aliases = admin_kms.list_aliases(KeyId=key["KeyId"])["Aliases"]
    assert [(a["AliasName"], a["TargetKeyId"]) for a in aliases] == [("alias/ops-billing", key["KeyId"])]
    assert aliases[0]["AliasArn"] == f"arn:aws:kms:{REGION}:{ACCOUNT}:alias/ops-billing"
    admin_kms.update_alias(AliasName="alias/ops-billing", TargetKeyId=other["KeyId"])
    assert admin_kms.describe_key(KeyId="alias/ops-billing")["KeyMetadata"]["KeyId"] == other["KeyId"]
    assert admin_kms.list_aliases(KeyId=key["KeyId"])["Aliases"] == []
    admin_kms.delete_alias(AliasName="alias/ops-billing")
    with pytest.raises(ClientError) as refused:
        admin_kms.describe_key(KeyId="alias/ops-billing")
    assert code(refused) == "NotFoundException"
    with pytest.raises(ClientError) as refused:
        admin_kms.delete_alias(AliasName="alias/ops-billing")
    assert code(refused) == "NotFoundException"


def test_several_aliases_per_key(admin_kms: Any, kms_server: Server) -> None:
    key, other = admin_kms.create_key()["KeyMetadata"], admin_kms.create_key()["KeyMetadata"]
    names = ["alias/many-a", "alias/many-b", "alias/many-c"]
    for name in names:
        admin_kms.create_alias(AliasName=name, TargetKeyId=key["KeyId"])
    listed = admin_kms.list_aliases(KeyId=key["KeyId"])["Aliases"]
    assert [(a["AliasName"], a["TargetKeyId"]) for a in listed] == [(n, key["KeyId"]) for n in names]
    assert {a["AliasName"] for a in admin_kms.list_aliases(Limit=1000)["Aliases"]} >= set(names)
    for name in names:  # each alias names the key, in every operation
        blob = admin_kms.encrypt(KeyId=name, Plaintext=b"p")["CiphertextBlob"]
        assert admin_kms.decrypt(CiphertextBlob=blob, KeyId=name)["KeyId"] == key["Arn"]
        described = admin_kms.describe_key(KeyId=f"arn:aws:kms:{REGION}:{ACCOUNT}:{name}")["KeyMetadata"]
        assert described["KeyId"] == key["KeyId"]
    with kms_server.client(kms_server.admin_token) as admin:  # REST: the key's name is its first alias
        assert admin.get("/v1/keys/many-b").json()["name"] == "many-a"
        assert admin.post("/v1/keys", json={"name": "many-c", "policy": {}}).status_code == 409
    for taken in names:  # an alias is unique across keys
        with pytest.raises(ClientError) as refused:
            admin_kms.create_alias(AliasName=taken, TargetKeyId=other["KeyId"])
        assert code(refused) == "AlreadyExistsException"
    # a further alias moves alone; the name moves and the key gets an unaliased name
    admin_kms.update_alias(AliasName="alias/many-b", TargetKeyId=other["KeyId"])
    admin_kms.update_alias(AliasName="alias/many-a", TargetKeyId=other["KeyId"])
    assert [a["AliasName"] for a in admin_kms.list_aliases(KeyId=key["KeyId"])["Aliases"]] == ["alias/many-c"]
    moved = admin_kms.list_aliases(KeyId=other["KeyId"])["Aliases"]
    assert [a["AliasName"] for a in moved] == ["alias/many-a", "alias/many-b"]
    with kms_server.client(kms_server.admin_token) as admin:
        assert admin.get(f"/v1/keys/{key['KeyId']}").json()["name"].startswith("kms-")
        assert admin.get("/v1/keys/many-a").json()["name"] == "many-b"  # it had a name: the moved alias is further
    admin_kms.delete_alias(AliasName="alias/many-b")  # the other key's name: it becomes unaliased, keeps many-a
    assert admin_kms.describe_key(KeyId="alias/many-a")["KeyMetadata"]["KeyId"] == other["KeyId"]
    with pytest.raises(ClientError) as refused:
        admin_kms.describe_key(KeyId="alias/many-b")
    assert code(refused) == "NotFoundException"
    admin_kms.delete_alias(AliasName="alias/many-c")
    assert admin_kms.list_aliases(KeyId=key["KeyId"])["Aliases"] == []


def test_aliases_move_only_between_keys_of_one_type_and_usage(admin_kms: Any) -> None:
    key = admin_kms.create_key()["KeyMetadata"]
    mac = admin_kms.create_key(KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]
    admin_kms.create_alias(AliasName="alias/typed", TargetKeyId=key["KeyId"])
    with pytest.raises(ClientError) as refused:
        admin_kms.update_alias(AliasName="alias/typed", TargetKeyId=mac["KeyId"])
    assert code(refused) == "ValidationException"
    with pytest.raises(ClientError) as refused:
        admin_kms.update_alias(AliasName="alias/never-made", TargetKeyId=key["KeyId"])
    assert code(refused) == "NotFoundException"


def test_a_key_holds_at_most_50_aliases(admin_kms: Any) -> None:
    key = admin_kms.create_key()["KeyMetadata"]
    for number in range(50):
        admin_kms.create_alias(AliasName=f"alias/quota-{number}", TargetKeyId=key["KeyId"])
    with pytest.raises(ClientError) as refused:
        admin_kms.create_alias(AliasName="alias/quota-50", TargetKeyId=key["KeyId"])
    assert code(refused) == "LimitExceededException"
    listed = admin_kms.list_aliases(KeyId=key["KeyId"], Limit=100)["Aliases"]
    assert len(listed) == 50


def test_list_keys_pages_with_limit_and_marker(admin_kms: Any) -> None:
    for _ in range(3):
        admin_kms.create_key()
    seen: list[str] = []
    page = admin_kms.list_keys(Limit=2)
    assert page["Truncated"] is True and len(page["Keys"]) == 2
    while True:
        seen += [k["KeyId"] for k in page["Keys"]]
        if not page["Truncated"]:
            break
        page = admin_kms.list_keys(Limit=2, Marker=page["NextMarker"])
    assert len(seen) == len(set(seen)) >= 3
    assert set(seen) == {k["KeyId"] for k in admin_kms.list_keys(Limit=1000)["Keys"]}
    with pytest.raises(ClientError) as refused:
        admin_kms.list_keys(Marker="garbage")
    assert code(refused) == "InvalidMarkerException"


def test_enable_disable(admin_kms: Any, key: dict[str, Any]) -> None:
    blob = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a")["CiphertextBlob"]
    admin_kms.disable_key(KeyId=key["KeyId"])
    assert admin_kms.describe_key(KeyId=key["KeyId"])["KeyMetadata"]["KeyState"] == "Disabled"
    for call in (
        lambda: admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a"),
        lambda: admin_kms.decrypt(CiphertextBlob=blob),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert code(refused) == "DisabledException"
    admin_kms.enable_key(KeyId=key["KeyId"])
    assert admin_kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b"a"


def test_update_key_description(admin_kms: Any, key: dict[str, Any]) -> None:
    admin_kms.update_key_description(KeyId=key["KeyId"], Description="new words")
    assert admin_kms.describe_key(KeyId=key["KeyId"])["KeyMetadata"]["Description"] == "new words"


def test_schedule_and_cancel_deletion(admin_kms: Any, key: dict[str, Any]) -> None:
    for days in (6, 31):
        with pytest.raises(ClientError) as refused:
            admin_kms.schedule_key_deletion(KeyId=key["KeyId"], PendingWindowInDays=days)
        assert code(refused) == "ValidationException"
    pending = admin_kms.schedule_key_deletion(KeyId=key["KeyId"], PendingWindowInDays=7)
    assert pending["KeyState"] == "PendingDeletion" and pending["PendingWindowInDays"] == 7
    assert pending["KeyId"] == key["Arn"]
    with pytest.raises(ClientError) as refused:
        admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a")
    assert code(refused) == "KMSInvalidStateException"
    assert admin_kms.describe_key(KeyId=key["KeyId"])["KeyMetadata"]["KeyState"] == "PendingDeletion"
    assert admin_kms.cancel_key_deletion(KeyId=key["KeyId"])["KeyId"] == key["Arn"]
    assert admin_kms.describe_key(KeyId=key["KeyId"])["KeyMetadata"]["KeyState"] == "Disabled"
    with pytest.raises(ClientError) as refused:
        admin_kms.cancel_key_deletion(KeyId=key["KeyId"])
    assert code(refused) == "KMSInvalidStateException"


def test_rotation(admin_kms: Any, key: dict[str, Any]) -> None:
    status = admin_kms.get_key_rotation_status(KeyId=key["KeyId"])
    assert status["KeyRotationEnabled"] is False
    admin_kms.enable_key_rotation(KeyId=key["KeyId"], RotationPeriodInDays=90)
    status = admin_kms.get_key_rotation_status(KeyId=key["KeyId"])
    assert status["KeyRotationEnabled"] is True and status["RotationPeriodInDays"] == 90
    admin_kms.schedule_key_deletion(KeyId=key["KeyId"], PendingWindowInDays=7)
    assert admin_kms.get_key_rotation_status(KeyId=key["KeyId"])["KeyRotationEnabled"] is False  # as AWS
    admin_kms.cancel_key_deletion(KeyId=key["KeyId"])
    status = admin_kms.get_key_rotation_status(KeyId=key["KeyId"])
    assert status["KeyRotationEnabled"] is True and status["RotationPeriodInDays"] == 90
    admin_kms.enable_key(KeyId=key["KeyId"])
    admin_kms.disable_key_rotation(KeyId=key["KeyId"])
    assert admin_kms.get_key_rotation_status(KeyId=key["KeyId"])["KeyRotationEnabled"] is False
    old = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"v1")["CiphertextBlob"]
    assert admin_kms.rotate_key_on_demand(KeyId=key["KeyId"])["KeyId"] == key["Arn"]
    new = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"v2")["CiphertextBlob"]
    assert int.from_bytes(old[20:24], "big") == 1 and int.from_bytes(new[20:24], "big") == 2
    assert admin_kms.decrypt(CiphertextBlob=old)["Plaintext"] == b"v1"


def test_hmac_keys(admin_kms: Any, kms_server: Server) -> None:
    key = admin_kms.create_key(KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]
    assert key["KeySpec"] == "HMAC_256" and key["MacAlgorithms"] == ["HMAC_SHA_256"]
    made = admin_kms.generate_mac(KeyId=key["KeyId"], Message=b"4111111111111111", MacAlgorithm="HMAC_SHA_256")
    again = admin_kms.generate_mac(KeyId=key["KeyId"], Message=b"4111111111111111", MacAlgorithm="HMAC_SHA_256")
    assert made["Mac"] == again["Mac"] and len(made["Mac"]) == 32
    checked = admin_kms.verify_mac(
        KeyId=key["KeyId"], Message=b"4111111111111111", Mac=made["Mac"], MacAlgorithm="HMAC_SHA_256"
    )
    assert checked["MacValid"] is True
    with pytest.raises(ClientError) as refused:
        admin_kms.verify_mac(
            KeyId=key["KeyId"], Message=b"4111111111111112", Mac=made["Mac"], MacAlgorithm="HMAC_SHA_256"
        )
    assert code(refused) == "KMSInvalidMacException"
    with pytest.raises(ClientError) as refused:
        admin_kms.generate_mac(KeyId=key["KeyId"], Message=b"m", MacAlgorithm="HMAC_SHA_512")
    assert code(refused) == "InvalidKeyUsageException"
    with pytest.raises(ClientError) as refused:
        admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a")
    assert code(refused) == "AccessDeniedException"  # the policy first, as through REST
    grant(kms_server, key["KeyId"], encrypt=["kms-admin"], mac=["kms-admin"])
    with pytest.raises(ClientError) as refused:
        admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a")
    assert code(refused) == "InvalidKeyUsageException"
    symmetric = admin_kms.create_key()["KeyMetadata"]
    grant(kms_server, symmetric["KeyId"], mac=["kms-admin"])
    with pytest.raises(ClientError) as refused:
        admin_kms.generate_mac(KeyId=symmetric["KeyId"], Message=b"m", MacAlgorithm="HMAC_SHA_256")
    assert code(refused) == "InvalidKeyUsageException"
    with pytest.raises(ClientError) as refused:
        admin_kms.enable_key_rotation(KeyId=key["KeyId"])
    assert code(refused) == "UnsupportedOperationException"
    grant(kms_server, key["KeyId"], decrypt=["kms-admin"])
    forged = b"km\x01\x02" + bytes.fromhex(key["KeyId"]) + (1).to_bytes(4, "big") + bytes(40)
    with pytest.raises(ClientError) as refused:
        admin_kms.decrypt(CiphertextBlob=forged)
    assert code(refused) == "InvalidKeyUsageException"


@pytest.mark.parametrize(
    ("method", "kwargs", "name"),
    [
        (
            "get_parameters_for_import",
            {"KeyId": "0" * 32, "WrappingAlgorithm": "RSA_AES_KEY_WRAP_SHA_256", "WrappingKeySpec": "RSA_4096"},
            "GetParametersForImport",
        ),
        (
            "import_key_material",
            {"KeyId": "0" * 32, "ImportToken": b"t", "EncryptedKeyMaterial": b"m"},
            "ImportKeyMaterial",
        ),
        ("create_grant", {"KeyId": "0" * 32, "GranteePrincipal": "p", "Operations": ["Encrypt"]}, "CreateGrant"),
        ("encapsulate", {"KeyId": "0" * 32, "EncapsulationAlgorithm": "ML_KEM"}, "Encapsulate"),
    ],
)
def test_other_operations_are_unsupported_by_name(
    admin_kms: Any, method: str, kwargs: dict[str, Any], name: str
) -> None:
    with pytest.raises(ClientError) as refused:
        getattr(admin_kms, method)(**kwargs)
    assert code(refused) == "UnsupportedOperationException" and name in str(refused.value)


def test_blob_is_base64_of_the_km1_ciphertext(admin_kms: Any, key: dict[str, Any], kms_server: Server) -> None:
    """A blob made through KMS decrypts through REST, spelt as the km:1 string of the same fields."""
    blob = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"both doors")["CiphertextBlob"]
    text = f"km:1:{blob[4:20].hex()}:{int.from_bytes(blob[20:24], 'big')}:" + base64.b64encode(blob[24:]).decode()
    with kms_server.client(kms_server.admin_token) as admin:
        assert admin.post("/v1/decrypt", json={"ciphertext": text}).status_code == 403  # not in the policy
        bootstrap = next(
            p["name"] for p in admin.get("/v1/principals").json() if p["name"] != "kms-admin" and p["role"] == "admin"
        )
        grant(kms_server, key["KeyId"], decrypt=[bootstrap])
        answer = admin.post("/v1/decrypt", json={"ciphertext": text})
        assert answer.status_code == 200 and base64.b64decode(answer.json()["plaintext"]) == b"both doors"


def test_get_key_policy_shows_the_native_policy(
    admin_kms: Any, app_kms: Any, kms_server: Server, key: dict[str, Any]
) -> None:
    grant(kms_server, key["KeyId"], encrypt=["kms-app"], decrypt=["kms-admin", "kms-app"])
    answer = admin_kms.get_key_policy(KeyId=key["KeyId"], PolicyName="default")
    document = json.loads(answer["Policy"])
    statements = {s["Sid"]: s for s in document["Statement"]}
    assert set(statements) == {"encrypt", "decrypt"}
    assert statements["encrypt"]["Principal"]["AWS"] == [f"arn:aws:iam::{ACCOUNT}:user/kms-app"]
    assert "kms:Decrypt" in statements["decrypt"]["Action"]
    assert len(statements["decrypt"]["Principal"]["AWS"]) == 2
    with pytest.raises(ClientError) as refused:
        admin_kms.get_key_policy(KeyId=key["KeyId"], PolicyName="other")
    assert code(refused) == "NotFoundException"
    with pytest.raises(ClientError) as refused:
        app_kms.get_key_policy(KeyId=key["KeyId"], PolicyName="default")
    assert code(refused) == "AccessDeniedException"


DIGEST_BYTES = {"HMAC_224": 28, "HMAC_256": 32, "HMAC_384": 48, "HMAC_512": 64}


@pytest.mark.parametrize("spec", list(DIGEST_BYTES))
def test_hmac_key_specs_are_plain_hmacs_of_the_message(admin_kms: Any, kms_server: Server, spec: str) -> None:
    """Each HMAC spec is an HMAC key of the HSM (the native API shows it), whose GenerateMac is AWS's
    plain HMAC(Message): the native MAC of ``data`` (no context) is HMAC(uint64(0) ‖ data). A spec
    whose HMAC the token lacks is refused by name at creation."""
    bits = spec.removeprefix("HMAC_")
    if f"HMAC_SHA{bits}" not in kms_server.supported():
        with pytest.raises(ClientError) as refused:
            admin_kms.create_key(KeySpec=spec, KeyUsage="GENERATE_VERIFY_MAC")
        assert code(refused) == "UnsupportedOperationException"
        assert f"does not support HMAC_SHA{bits} (no CKM_SHA{bits}_HMAC" in str(refused.value)
        return
    made = admin_kms.create_key(KeySpec=spec, KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]
    assert made["KeySpec"] == made["CustomerMasterKeySpec"] == spec and made["MacAlgorithms"] == [f"HMAC_SHA_{bits}"]
    algorithm = f"HMAC_SHA_{bits}"
    mac = admin_kms.generate_mac(KeyId=made["KeyId"], Message=b"card", MacAlgorithm=algorithm)
    assert len(mac["Mac"]) == DIGEST_BYTES[spec] and mac["MacAlgorithm"] == algorithm
    verified = admin_kms.verify_mac(KeyId=made["KeyId"], Message=b"card", Mac=mac["Mac"], MacAlgorithm=algorithm)
    assert verified["MacValid"] is True and verified["MacAlgorithm"] == algorithm
    with kms_server.client(kms_server.admin_token) as admin:
        native = admin.get(f"/v1/keys/{made['KeyId']}").json()
        assert native["algorithm"] == f"HMAC_SHA{bits}"
        bootstrap = next(
            p["name"] for p in admin.get("/v1/principals").json() if p["name"] != "kms-admin" and p["role"] == "admin"
        )
        grant(kms_server, made["KeyId"], mac=["kms-admin", bootstrap])
        answer = admin.post(f"/v1/keys/{made['KeyId']}/mac", json={"data": base64.b64encode(b"card").decode()})
        assert answer.status_code == 200, answer.text
    framed = admin_kms.generate_mac(KeyId=made["KeyId"], Message=bytes(8) + b"card", MacAlgorithm=algorithm)
    assert base64.b64decode(answer.json()["mac"]) == framed["Mac"] != mac["Mac"]
    other = next(a for a in ("HMAC_SHA_224", "HMAC_SHA_512") if a != algorithm)
    for call in (
        lambda: admin_kms.generate_mac(KeyId=made["KeyId"], Message=b"card", MacAlgorithm=other),
        lambda: admin_kms.verify_mac(KeyId=made["KeyId"], Message=b"card", Mac=mac["Mac"], MacAlgorithm=other),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert code(refused) == "InvalidKeyUsageException"
    with pytest.raises(ClientError) as refused:
        admin_kms.generate_mac(KeyId=made["KeyId"], Message=b"card", MacAlgorithm="HMAC_MD5")
    assert code(refused) == "ValidationException"
    with pytest.raises(ClientError) as refused:
        admin_kms.create_key(KeySpec=spec, KeyUsage="ENCRYPT_DECRYPT")
    assert code(refused) == "ValidationException"


def test_native_hmac_keys_show_their_spec(admin_kms: Any, kms_server: Server) -> None:
    with kms_server.client(kms_server.admin_token) as admin:
        made = admin.post(
            "/v1/keys", json={"name": "native-hmac-384", "algorithm": "HMAC_SHA384", "policy": {"mac": ["kms-admin"]}}
        )
        assert made.status_code == 201, made.text
    described = admin_kms.describe_key(KeyId="alias/native-hmac-384")["KeyMetadata"]
    assert described["KeySpec"] == "HMAC_384" and described["KeyUsage"] == "GENERATE_VERIFY_MAC"
    mac = admin_kms.generate_mac(KeyId="alias/native-hmac-384", Message=b"m", MacAlgorithm="HMAC_SHA_384")["Mac"]
    assert len(mac) == 48
