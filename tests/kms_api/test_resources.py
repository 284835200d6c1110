"""Key policies, tags, grants and rotations through unmodified boto3: success and refusal paths."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import Server
from tests.kms_api.conftest import ACCOUNT
from tests.kms_api.test_operations import code


def user(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:user/{name}"


def statement(principals: list[str], actions: list[str], **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Principal": {"AWS": principals}, "Action": actions, "Resource": "*", **extra}


def document(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


@pytest.fixture
def key(admin_kms: Any) -> dict[str, Any]:
    return admin_kms.create_key(Description="resources")["KeyMetadata"]  # type: ignore[no-any-return]


def native_policy(server: Server, key_id: str) -> dict[str, Any]:
    with server.client(server.admin_token) as admin:
        answer = admin.get(f"/v1/keys/{key_id}")
        assert answer.status_code == 200, answer.text
        return answer.json()["policy"]  # type: ignore[no-any-return]


def test_put_key_policy_is_the_native_policy_and_is_enforced(
    admin_kms: Any, app_kms: Any, kms_server: Server, key: dict[str, Any]
) -> None:
    with pytest.raises(ClientError) as refused:
        app_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"before")
    assert code(refused) == "AccessDeniedException"
    policy = document(
        statement([user("kms-app")], ["kms:Encrypt", "kms:ReEncryptTo"], Sid="app encrypts"),
        statement([user("kms-admin"), user("kms-app")], ["kms:Decrypt", "kms:ReEncryptFrom"]),
        statement([user("kms-admin")], ["kms:GenerateDataKey*"]),
    )
    admin_kms.put_key_policy(KeyId=key["KeyId"], PolicyName="default", Policy=policy)
    native = native_policy(kms_server, key["KeyId"])
    assert native["encrypt"] == ["kms-app"] and native["decrypt"] == ["kms-admin", "kms-app"]
    assert native["generate_data_key"] == ["kms-admin"] and native["reencrypt"] == [] and native["mac"] == []
    assert native["generate_data_key_pair"] == ["kms-admin"]  # kms:GenerateDataKey* matches its actions too
    blob = app_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"after")["CiphertextBlob"]
    assert admin_kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b"after"
    with pytest.raises(ClientError) as refused:
        admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"admin may not")
    assert code(refused) == "AccessDeniedException"


def test_get_key_policy_round_trips_what_put_key_policy_stored(admin_kms: Any, key: dict[str, Any]) -> None:
    window = {
        "DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00+00:00"},
        "DateLessThan": {"aws:CurrentTime": "2999-01-01T00:00:00+00:00"},
    }
    policy = document(
        statement([user("kms-app")], ["kms:encrypt", "KMS:ReEncryptTo"], Condition=window),
        statement([user("kms-app")], ["kms:GenerateMac", "kms:VerifyMac"], Condition=window),
    )
    admin_kms.put_key_policy(KeyId=key["KeyId"], PolicyName="default", Policy=policy)
    shown = admin_kms.get_key_policy(KeyId=key["KeyId"], PolicyName="default")["Policy"]
    statements = {s["Sid"]: s for s in json.loads(shown)["Statement"]}
    assert set(statements) == {"encrypt", "mac"}
    assert statements["encrypt"]["Condition"] == window
    admin_kms.put_key_policy(KeyId=key["KeyId"], PolicyName="default", Policy=shown)
    assert admin_kms.get_key_policy(KeyId=key["KeyId"], PolicyName="default")["Policy"] == shown


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (statement([user("kms-app")], ["kms:Encrypt"], Sid="half"), "Sid 'half'"),
        (statement([user("kms-app")], ["kms:*"]), "kms:*"),
        (statement([user("kms-app")], ["kms:Encrypt", "kms:ReEncryptTo"], Effect="Deny"), "Effect Allow"),
        ({**statement([user("kms-app")], ["kms:Decrypt", "kms:ReEncryptFrom"]), "Resource": "arn:x"}, "Resource"),
        (statement([f"arn:aws:iam::{ACCOUNT}:root"], ["kms:Decrypt", "kms:ReEncryptFrom"]), "is not a user"),
        (statement([user("nobody-of-that-name")], ["kms:Decrypt", "kms:ReEncryptFrom"]), "nobody-of-that-name"),
        (statement(["arn:aws:iam::999999999999:user/kms-app"], ["kms:Decrypt", "kms:ReEncryptFrom"]), "account"),
        (
            statement(
                [user("kms-app")],
                ["kms:Decrypt", "kms:ReEncryptFrom"],
                Condition={"StringEquals": {"kms:EncryptionContext:app": "x"}},
            ),
            "aws:CurrentTime",
        ),
        ({**statement([user("kms-app")], ["kms:Decrypt", "kms:ReEncryptFrom"]), "NotAction": "kms:Sign"}, "NotAction"),
    ],
)
def test_put_key_policy_refuses_what_the_native_policy_cannot_say(
    admin_kms: Any, kms_server: Server, key: dict[str, Any], bad: dict[str, Any], says: str
) -> None:
    before = native_policy(kms_server, key["KeyId"])
    good = statement([user("kms-admin")], ["kms:Encrypt", "kms:ReEncryptTo"])
    with pytest.raises(ClientError) as refused:
        admin_kms.put_key_policy(KeyId=key["KeyId"], PolicyName="default", Policy=document(good, bad))
    assert code(refused) == "MalformedPolicyDocumentException"
    message = str(refused.value)
    assert "statement 2" in message and says in message
    assert native_policy(kms_server, key["KeyId"]) == before  # nothing stored


def test_put_key_policy_other_refusals(admin_kms: Any, app_kms: Any, key: dict[str, Any]) -> None:
    window = {"DateLessThan": {"aws:CurrentTime": "2999-01-01T00:00:00Z"}}
    uneven = document(
        statement([user("kms-app")], ["kms:Encrypt", "kms:ReEncryptTo"], Condition=window),
        statement([user("kms-app")], ["kms:Decrypt", "kms:ReEncryptFrom"]),
    )
    for policy in ("not json", "[]", uneven):
        with pytest.raises(ClientError) as refused:
            admin_kms.put_key_policy(KeyId=key["KeyId"], PolicyName="default", Policy=policy)
        assert code(refused) == "MalformedPolicyDocumentException"
    with pytest.raises(ClientError) as refused:
        admin_kms.put_key_policy(KeyId=key["KeyId"], PolicyName="other", Policy=document())
    assert code(refused) == "NotFoundException"
    with pytest.raises(ClientError) as refused:
        app_kms.put_key_policy(KeyId=key["KeyId"], PolicyName="default", Policy=document())
    assert code(refused) == "AccessDeniedException"
    with pytest.raises(ClientError) as refused:
        admin_kms.put_key_policy(KeyId="0" * 32, PolicyName="default", Policy=document())
    assert code(refused) == "NotFoundException"


def test_create_key_with_a_policy_and_tags(admin_kms: Any, app_kms: Any, kms_server: Server) -> None:
    policy = document(statement([user("kms-app")], ["kms:Encrypt", "kms:ReEncryptTo"]))
    tags = [{"TagKey": "team", "TagValue": "billing"}, {"TagKey": "empty", "TagValue": ""}]
    made = admin_kms.create_key(Policy=policy, Tags=tags)["KeyMetadata"]
    assert native_policy(kms_server, made["KeyId"])["encrypt"] == ["kms-app"]
    app_kms.encrypt(KeyId=made["KeyId"], Plaintext=b"allowed")
    listed = admin_kms.list_resource_tags(KeyId=made["KeyId"])
    assert listed["Tags"] == sorted(tags, key=lambda t: t["TagKey"]) and listed["Truncated"] is False
    keys_before = len(admin_kms.list_keys(Limit=1000)["Keys"])
    for refused_call in (
        lambda: admin_kms.create_key(Tags=[{"TagKey": "aws:reserved", "TagValue": "x"}]),
        lambda: admin_kms.create_key(Tags=[{"TagKey": "k" * 129, "TagValue": "x"}]),
        lambda: admin_kms.create_key(Policy=document(statement([user("ghost")], ["kms:Decrypt"]))),
    ):
        with pytest.raises(ClientError) as refused:
            refused_call()
        assert code(refused) in ("TagException", "MalformedPolicyDocumentException")
    assert len(admin_kms.list_keys(Limit=1000)["Keys"]) == keys_before  # nothing made


def test_tags(admin_kms: Any, app_kms: Any, key: dict[str, Any]) -> None:
    key_id = key["KeyId"]
    admin_kms.tag_resource(KeyId=key_id, Tags=[{"TagKey": "b", "TagValue": "1"}, {"TagKey": "a", "TagValue": "2"}])
    admin_kms.tag_resource(KeyId=key["Arn"], Tags=[{"TagKey": "b", "TagValue": "replaced"}])
    assert admin_kms.list_resource_tags(KeyId=key_id)["Tags"] == [
        {"TagKey": "a", "TagValue": "2"},
        {"TagKey": "b", "TagValue": "replaced"},
    ]
    admin_kms.untag_resource(KeyId=key_id, TagKeys=["a", "not-there"])
    assert admin_kms.list_resource_tags(KeyId=key_id)["Tags"] == [{"TagKey": "b", "TagValue": "replaced"}]
    admin_kms.tag_resource(KeyId=key_id, Tags=[{"TagKey": f"t{n:02}", "TagValue": "v"} for n in range(49)])
    first = admin_kms.list_resource_tags(KeyId=key_id, Limit=20)
    assert len(first["Tags"]) == 20 and first["Truncated"] is True
    rest = admin_kms.list_resource_tags(KeyId=key_id, Limit=50, Marker=first["NextMarker"])
    assert len(rest["Tags"]) == 30 and rest["Truncated"] is False and "NextMarker" not in rest
    for tags, error in (
        ([{"TagKey": "one-too-many", "TagValue": "v"}], "TagException"),
        ([{"TagKey": "b", "TagValue": "v" * 257}], "TagException"),
        ([{"TagKey": "k" * 129, "TagValue": "v"}], "TagException"),
        ([{"TagKey": "aws:x", "TagValue": "v"}], "TagException"),
        ([{"TagKey": "b", "TagValue": "1"}, {"TagKey": "b", "TagValue": "2"}], "TagException"),
    ):
        with pytest.raises(ClientError) as refused:
            admin_kms.tag_resource(KeyId=key_id, Tags=tags)
        assert code(refused) == error, tags
    assert len(admin_kms.list_resource_tags(KeyId=key_id)["Tags"]) == 50
    for call in (
        lambda: app_kms.tag_resource(KeyId=key_id, Tags=[{"TagKey": "x", "TagValue": "y"}]),
        lambda: app_kms.untag_resource(KeyId=key_id, TagKeys=["b"]),
        lambda: app_kms.list_resource_tags(KeyId=key_id),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert code(refused) == "AccessDeniedException"
    with pytest.raises(ClientError) as refused:
        admin_kms.list_resource_tags(KeyId="0" * 32)
    assert code(refused) == "NotFoundException"
    with pytest.raises(ClientError) as refused:
        admin_kms.list_resource_tags(KeyId=key_id, Marker="not-a-marker")
    assert code(refused) == "InvalidMarkerException"
    admin_kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=7)
    with pytest.raises(ClientError) as refused:
        admin_kms.tag_resource(KeyId=key_id, Tags=[{"TagKey": "late", "TagValue": "v"}])
    assert code(refused) == "KMSInvalidStateException"


def test_list_key_policies_and_grants(admin_kms: Any, app_kms: Any, key: dict[str, Any]) -> None:
    answer = admin_kms.list_key_policies(KeyId=key["KeyId"])
    assert answer["PolicyNames"] == ["default"] and answer["Truncated"] is False
    grants = admin_kms.list_grants(KeyId=key["Arn"])
    assert grants["Grants"] == [] and grants["Truncated"] is False
    for call in (lambda k: admin_kms.list_key_policies(KeyId=k), lambda k: admin_kms.list_grants(KeyId=k)):
        with pytest.raises(ClientError) as refused:
            call("0" * 32)
        assert code(refused) == "NotFoundException"
    with pytest.raises(ClientError) as refused:
        app_kms.list_grants(KeyId=key["KeyId"])
    assert code(refused) == "AccessDeniedException"


def test_list_key_rotations(admin_kms: Any, app_kms: Any, key: dict[str, Any]) -> None:
    assert admin_kms.list_key_rotations(KeyId=key["KeyId"])["Rotations"] == []
    for _ in range(3):
        admin_kms.rotate_key_on_demand(KeyId=key["KeyId"])
    everything = admin_kms.list_key_rotations(KeyId=key["KeyId"])
    dates = [r["RotationDate"] for r in everything["Rotations"]]
    assert len(dates) == 3 and dates == sorted(dates) and everything["Truncated"] is False
    assert {r["KeyId"] for r in everything["Rotations"]} == {key["Arn"]}
    first = admin_kms.list_key_rotations(KeyId=key["KeyId"], Limit=2)
    assert len(first["Rotations"]) == 2 and first["Truncated"] is True
    rest = admin_kms.list_key_rotations(KeyId=key["KeyId"], Marker=first["NextMarker"])
    assert [r["RotationDate"] for r in first["Rotations"] + rest["Rotations"]] == dates
    with pytest.raises(ClientError) as refused:
        app_kms.list_key_rotations(KeyId=key["KeyId"])
    assert code(refused) == "AccessDeniedException"
    with pytest.raises(ClientError) as refused:
        admin_kms.list_key_rotations(KeyId="0" * 32)
    assert code(refused) == "NotFoundException"
