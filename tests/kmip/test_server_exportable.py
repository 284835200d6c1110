"""Exportable keys: created by an admin (``x-exportable`` or 1.4's Extractable), generated in the HSM
extractable but sensitive, their material handed out by Get to principals named for
``get_key_material``, every export audited; refused to everyone else and for every other key."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.padding import PKCS7
from kmip import enums
from kmip.core import objects
from kmip.core.factories.attributes import AttributeFactory
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import OWNER, KmipServer, kmip_server

__all__ = ["kmip_server"]

ADMIN = "kmip-admin"
_FACTORY = AttributeFactory()


def _template(custom: bool = False) -> objects.TemplateAttribute:
    """AES-256, exportable: KMIP 1.4's Extractable attribute, or the custom ``x-exportable`` text ``true``."""
    exportable = (
        _FACTORY.create_attribute("x-exportable", "true")
        if custom
        else _FACTORY.create_attribute(enums.AttributeType.EXTRACTABLE, True)
    )
    return objects.TemplateAttribute(
        attributes=[
            _FACTORY.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_ALGORITHM, enums.CryptographicAlgorithm.AES),
            _FACTORY.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_LENGTH, 256),
            exportable,
        ]
    )


def test_an_admin_creates_an_exportable_key_and_gets_its_material(kmip_server: KmipServer) -> None:
    with kmip_server.connected(ADMIN) as admin:
        created = admin.proxy.create(enums.ObjectType.SYMMETRIC_KEY, _template())
        assert created.result_status.value == enums.ResultStatus.SUCCESS, created.result_message
        uid = created.uuid
        admin.activate(uid)
        material = admin.get(uid).value
        assert len(material) == 32
        sealed, iv = admin.encrypt(b"exported", uid=uid, cryptographic_parameters={"random_iv": True})
    opened = Cipher(algorithms.AES(material), modes.CBC(iv)).decryptor()
    padded = opened.update(sealed) + opened.finalize()
    unpadder = PKCS7(128).unpadder()
    assert unpadder.update(padded) + unpadder.finalize() == b"exported"  # the HSM's key, handed out
    exports = [r for r in kmip_server.audit("kmip.Get") if r["key_id"] == uid]
    assert exports and exports[-1]["details"].get("exported") is True and exports[-1]["outcome"] == "ok"
    with kmip_server.admin() as rest:
        shown = rest.get(f"/v1/keys/{uid}").json()
    assert shown["exportable"] is True and shown["kmip_state"] == "active"


@pytest.mark.parametrize("custom", [False, True], ids=["extractable", "x-exportable"])
def test_an_app_may_not_create_an_exportable_key(kmip_server: KmipServer, custom: bool) -> None:
    with kmip_server.connected(OWNER) as owner:
        refused = owner.proxy.create(enums.ObjectType.SYMMETRIC_KEY, _template(custom))
    assert refused.result_status.value == enums.ResultStatus.OPERATION_FAILED
    assert refused.result_reason.value == enums.ResultReason.PERMISSION_DENIED


def test_a_principal_not_named_for_get_key_material_gets_nothing(kmip_server: KmipServer) -> None:
    with kmip_server.connected(ADMIN) as admin:
        uid = admin.proxy.create(enums.ObjectType.SYMMETRIC_KEY, _template(custom=True)).uuid
    with kmip_server.admin() as rest:
        key = rest.get(f"/v1/keys/{uid}").json()
        policy = {**key["policy"], "encrypt": [OWNER]}
        assert rest.patch(f"/v1/keys/{uid}", json={"policy": policy}).status_code == 200
    with kmip_server.connected(OWNER) as owner, pytest.raises(KmipOperationFailure) as refused:
        owner.get(uid)
    assert refused.value.reason == enums.ResultReason.PERMISSION_DENIED
    assert "get_key_material" in str(refused.value)
