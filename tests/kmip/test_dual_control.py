"""Dual control at the KMIP door (issue 40), with PyKMIP's client: Revoke (disabling an active key),
Destroy and Get of an exportable key answer Operation Failed, Permission Denied, naming the approval
request; once an admin approved, the same operation runs."""

from __future__ import annotations

import pytest
from kmip.core import enums
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import KEY_STORE, OWNER, KmipServer, create_aes, kmip_server
from tests.support.approvals import approve, approver, guard_key, request_id_in, state_of

__all__ = ["kmip_server"]


def pending(failure: pytest.ExceptionInfo[KmipOperationFailure]) -> str:
    assert failure.value.reason == enums.ResultReason.PERMISSION_DENIED
    return request_id_in(str(failure.value))


def test_revoke_and_destroy_wait_for_approval(kmip_server: KmipServer) -> None:
    server, uid = kmip_server.server, create_aes(kmip_server, OWNER)
    guard_key(server, uid, {"key.disable": {"approvals": 1}, "key.delete": {"approvals": 1}})
    other = approver(server)
    with kmip_server.connected(OWNER) as client:
        with pytest.raises(KmipOperationFailure) as refused:
            client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, uid)
        assert state_of(server, uid) == "enabled"
        approve(server, other, pending(refused))
        client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, uid)
        assert state_of(server, uid) == "disabled"
        with pytest.raises(KmipOperationFailure) as refused:
            client.destroy(uid)
        approve(server, other, pending(refused))
        client.destroy(uid)
    assert state_of(server, uid) == "pending_deletion"


def test_get_of_an_exportable_key_waits_for_approval(kmip_server: KmipServer) -> None:
    server = kmip_server.server
    with kmip_server.connected(KEY_STORE) as client:
        uid = client.create(enums.CryptographicAlgorithm.AES, 256)
        guard_key(server, uid, {"key.export": {"approvals": 1}})
        with pytest.raises(KmipOperationFailure) as refused:
            client.get(uid)
        approve(server, approver(server), pending(refused))
        assert len(bytes(client.get(uid).value)) == 32
        with pytest.raises(KmipOperationFailure):  # executed once: the next Get asks again
            client.get(uid)
