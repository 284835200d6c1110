"""Dual control at the Vault Transit door (issue 40), with hvac: deleting a key and exporting an
exportable one wait for another admin's approval (hvac raises the door's 400 naming the request), then
run once when sent again."""

from __future__ import annotations

import hvac
import pytest

from tests.e2e.conftest import Server
from tests.support.approvals import approve, approver, guard_key, request_id_in, state_of
from tests.transit.conftest import new_name


def test_delete_and_export_wait_for_approval(admin_vault: hvac.Client, transit_server: Server) -> None:
    transit, name = admin_vault.secrets.transit, new_name("dual")
    transit.create_key(name, exportable=True)
    transit.update_key_configuration(name, deletion_allowed=True)
    guard_key(transit_server, name, {"key.delete": {"approvals": 1}, "key.export": {"approvals": 1}})
    other = approver(transit_server)

    with pytest.raises(hvac.exceptions.InvalidRequest) as refused:
        transit.export_key(name, key_type="encryption-key", version="latest")
    assert approve(transit_server, other, request_id_in(str(refused.value)))["state"] == "approved"
    exported = transit.export_key(name, key_type="encryption-key", version="latest")["data"]
    assert set(exported["keys"]) == {"1"}

    with pytest.raises(hvac.exceptions.InvalidRequest) as refused:
        transit.delete_key(name)
    assert state_of(transit_server, name) == "enabled"
    approve(transit_server, other, request_id_in(str(refused.value)))
    transit.delete_key(name)
    assert state_of(transit_server, name) == "pending_deletion"
