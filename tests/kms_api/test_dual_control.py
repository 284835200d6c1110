"""Dual control at the AWS KMS door (issue 40), with boto3: a guarded call is refused with
``KMSInvalidStateException`` whose message names the approval request, runs nothing, and runs once re-sent after
another admin approved it."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import Server
from tests.support.approvals import approve, approver, guard_key, request_id_in, state_of


def pending(call: Any, **arguments: Any) -> str:
    with pytest.raises(ClientError) as refused:
        call(**arguments)
    error = refused.value.response["Error"]
    assert error["Code"] == "KMSInvalidStateException", error
    return request_id_in(error["Message"])


def test_schedule_key_deletion_and_disable_key_wait_for_approval(admin_kms: Any, kms_server: Server) -> None:
    key = admin_kms.create_key(Description="dual control")["KeyMetadata"]["KeyId"]
    guard_key(kms_server, key, {"key.delete": {"approvals": 1}, "key.disable": {"approvals": 1}})
    other = approver(kms_server)

    disabling = pending(admin_kms.disable_key, KeyId=key)
    assert admin_kms.describe_key(KeyId=key)["KeyMetadata"]["KeyState"] == "Enabled"
    assert approve(kms_server, other, disabling)["state"] == "approved"
    admin_kms.disable_key(KeyId=key)
    assert admin_kms.describe_key(KeyId=key)["KeyMetadata"]["KeyState"] == "Disabled"

    deleting = pending(admin_kms.schedule_key_deletion, KeyId=key, PendingWindowInDays=7)
    assert state_of(kms_server, key) == "disabled"
    approve(kms_server, other, deleting)
    with pytest.raises(ClientError):  # another window is another call: not the approved one
        admin_kms.schedule_key_deletion(KeyId=key, PendingWindowInDays=8)
    assert state_of(kms_server, key) == "disabled"
    assert admin_kms.schedule_key_deletion(KeyId=key, PendingWindowInDays=7)["KeyState"] == "PendingDeletion"


def test_put_key_policy_granting_decrypt_waits_for_approval(admin_kms: Any, app_pair: Any, kms_server: Server) -> None:
    from tests.kms_api.test_resources import document, native_policy, statement, user

    key = admin_kms.create_key(Description="dual control grants")["KeyMetadata"]["KeyId"]
    guard_key(kms_server, key, {"key.grant": {"approvals": 1}})
    encrypt_only = document(statement([user(app_pair.principal)], ["kms:Encrypt", "kms:ReEncryptTo"]))
    admin_kms.put_key_policy(KeyId=key, PolicyName="default", Policy=encrypt_only)  # no decrypt: not guarded
    granting = document(
        statement([user(app_pair.principal)], ["kms:Encrypt", "kms:ReEncryptTo", "kms:Decrypt", "kms:ReEncryptFrom"])
    )
    request_id = pending(admin_kms.put_key_policy, KeyId=key, PolicyName="default", Policy=granting)
    assert native_policy(kms_server, key)["decrypt"] == []
    approve(kms_server, approver(kms_server), request_id)
    admin_kms.put_key_policy(KeyId=key, PolicyName="default", Policy=granting)
    assert native_policy(kms_server, key)["decrypt"] == [app_pair.principal]
