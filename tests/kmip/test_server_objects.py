"""Register and Get of secret data (libmongocrypt's non-delegated mode), opaque objects and
certificates, Locate and the attribute operations, with ``ProxyKmipClient`` over mTLS."""

from __future__ import annotations

import pytest
from kmip import enums
from kmip.pie import objects
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import OWNER, STRANGER, KmipServer, kmip_server

__all__ = ["kmip_server"]


def test_registered_secret_data_comes_back_to_its_owner_only(kmip_server: KmipServer) -> None:
    secret = bytes(range(96))
    with kmip_server.connected(OWNER) as owner:
        uid = owner.register(objects.SecretData(secret, enums.SecretDataType.SEED, name="mongo-local-key"))
        owner.activate(uid)
        got = owner.get(uid)
        assert isinstance(got, objects.SecretData) and got.value == secret
    with kmip_server.connected(STRANGER) as stranger:
        with pytest.raises(KmipOperationFailure) as refused:
            stranger.get(uid)
        assert (
            refused.value.reason == enums.ResultReason.ITEM_NOT_FOUND
        )  # not told apart from an object that does not exist


def test_an_opaque_object_is_stored_sealed_and_destroyed(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as owner:
        uid = owner.register(objects.OpaqueObject(b"opaque bytes", enums.OpaqueDataType.NONE))
        assert owner.get(uid).value == b"opaque bytes"
        owner.destroy(uid)
        with pytest.raises(KmipOperationFailure) as gone:
            owner.get(uid)
        assert gone.value.reason == enums.ResultReason.PERMISSION_DENIED


def test_locate_finds_by_name_object_type_and_state(kmip_server: KmipServer) -> None:
    factory_name = "locate-me"
    with kmip_server.connected(OWNER) as owner:
        first = owner.create(enums.CryptographicAlgorithm.AES, 256, name=factory_name)
        second = owner.create(enums.CryptographicAlgorithm.AES, 256, name=factory_name)
        owner.activate(second)
        name = owner.attribute_factory.create_attribute(enums.AttributeType.NAME, factory_name)
        assert owner.locate(attributes=[name]) == [second, first]
        active = owner.attribute_factory.create_attribute(enums.AttributeType.STATE, enums.State.ACTIVE)
        assert owner.locate(attributes=[name, active]) == [second]
        assert owner.locate(attributes=[name], maximum_items=1, offset_items=1) == [first]
        kind = owner.attribute_factory.create_attribute(enums.AttributeType.OBJECT_TYPE, enums.ObjectType.SECRET_DATA)
        assert first not in owner.locate(attributes=[kind])
    with kmip_server.connected(STRANGER) as stranger:
        assert stranger.locate(attributes=[name]) == []


def test_attributes_are_read_and_changed(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as owner:
        uid = owner.create(enums.CryptographicAlgorithm.AES, 256, name="attributes")
        got_uid, found = owner.get_attributes(uid, ["State", "Name", "Cryptographic Length"])
        values = {a.attribute_name.value: a.attribute_value for a in found}
        assert got_uid == uid and values["State"].value == enums.State.PRE_ACTIVE
        assert values["Cryptographic Length"].value == 256
        assert values["Name"].name_value.value == "attributes"
        names = owner.get_attribute_list(uid)
        assert {"Unique Identifier", "Object Type", "State", "Name"} <= set(names)


def test_a_certificate_is_located_by_its_type_and_destroyed_objects_are_not_located(kmip_server: KmipServer) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    pem = (kmip_server.server.ca).read_bytes()
    der = x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)
    with kmip_server.connected(OWNER) as owner:
        uid = owner.register(objects.X509Certificate(der, name="the CA"))
        x509_type = owner.attribute_factory.create_attribute(
            enums.AttributeType.CERTIFICATE_TYPE, enums.CertificateType.X_509
        )
        pgp_type = owner.attribute_factory.create_attribute(
            enums.AttributeType.CERTIFICATE_TYPE, enums.CertificateType.PGP
        )
        assert uid in owner.locate(attributes=[x509_type])
        assert uid not in owner.locate(attributes=[pgp_type])
        assert owner.get(uid).value == der
        owner.destroy(uid)
        assert uid not in owner.locate()
        destroyed = owner.attribute_factory.create_attribute(enums.AttributeType.STATE, enums.State.DESTROYED)
        assert uid in owner.locate(attributes=[destroyed])


class _AddAttribute:
    """KMIP 1.x's AddAttribute payload (PyKMIP's codec has none): a unique identifier and an Attribute."""

    def __init__(self, uid: str, attribute: object) -> None:
        self.uid, self.attribute = uid, attribute

    def write(self, stream: object, kmip_version: object = None) -> None:
        from kmip.core import primitives, utils

        inner = utils.BytearrayStream()
        primitives.TextString(self.uid, enums.Tags.UNIQUE_IDENTIFIER).write(inner, kmip_version=kmip_version)
        self.attribute.write(inner, kmip_version=kmip_version)  # type: ignore[attr-defined]
        header = (0x420079).to_bytes(3, "big") + b"\x01" + len(inner.buffer).to_bytes(4, "big")
        stream.write(header + bytes(inner.buffer))  # type: ignore[attr-defined]


def test_add_attribute_adds_a_name_and_a_custom_attribute(kmip_server: KmipServer) -> None:
    from tests.kmip.server_fixtures import request_message

    with kmip_server.connected(OWNER) as owner:
        uid = owner.create(enums.CryptographicAlgorithm.AES, 256, name="first")
        factory = owner.attribute_factory
        added = (
            factory.create_attribute(enums.AttributeType.NAME, "second"),
            factory.create_attribute("x-team", "payments"),
        )
        for attribute in added:
            with kmip_server.tls(OWNER) as raw:
                raw.sendall(request_message([(enums.Operation.ADD_ATTRIBUTE, _AddAttribute(uid, attribute))]))
                head = raw.recv(8)
                body = b""
                while len(body) < int.from_bytes(head[4:8], "big"):
                    body += raw.recv(65536)
            assert bytes.fromhex("42007f050000000400000000") in body  # Result Status: Success
        _, found = owner.get_attributes(uid, ["Name", "x-team"])
        names = [a.attribute_value.name_value.value for a in found if a.attribute_name.value == "Name"]
        custom = [a.attribute_value.value for a in found if a.attribute_name.value == "x-team"]
        assert names == ["first", "second"] and custom == ["payments"]
        name = factory.create_attribute(enums.AttributeType.NAME, "second")
        assert uid in owner.locate(attributes=[name])


def test_locate_takes_two_values_of_a_date_as_a_range(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as owner:
        factory = owner.attribute_factory
        first = owner.create(enums.CryptographicAlgorithm.AES, 128, name="dated")
        second = owner.create(enums.CryptographicAlgorithm.AES, 192, name="dated")
        dates = [owner.get_attributes(uid, ["Initial Date"])[1][0].attribute_value.value for uid in (first, second)]
        name = factory.create_attribute(enums.AttributeType.NAME, "dated")

        def between(low: int, high: int) -> list[str]:
            ends = [factory.create_attribute(enums.AttributeType.INITIAL_DATE, end) for end in (low, high)]
            return list(owner.locate(attributes=[name, *ends]))

        assert between(dates[0], dates[1]) == [second, first]
        assert between(dates[1], dates[0]) == [second, first]  # either order
        assert first in between(dates[0], dates[0])
        assert between(dates[1] + 1, dates[1] + 3600) == []
        assert between(dates[0] - 3600, dates[0] - 1) == []
        exactly = factory.create_attribute(enums.AttributeType.INITIAL_DATE, dates[0])
        assert first in owner.locate(attributes=[name, exactly])  # one value: that date exactly
        default = factory.create_attribute(enums.AttributeType.OPERATION_POLICY_NAME, "default")
        assert {first, second} <= set(owner.locate(attributes=[name, default]))  # none set: "default"


def test_multi_valued_attributes_carry_their_index_and_changes_answer_the_attribute(kmip_server: KmipServer) -> None:
    from kmip.core.exceptions import OperationFailure
    from kmip.core.messages import payloads

    with kmip_server.connected(OWNER) as owner:
        uid = owner.create(enums.CryptographicAlgorithm.AES, 256, name="indexed")
        _, found = owner.get_attributes(uid, ["Name"])
        assert [(a.attribute_index.value, a.attribute_value.name_value.value) for a in found] == [(0, "indexed")]
        renamed = owner.attribute_factory.create_attribute(enums.AttributeType.NAME, "renamed", index=0)
        modified = owner.proxy.send_request_payload(
            enums.Operation.MODIFY_ATTRIBUTE,
            payloads.ModifyAttributeRequestPayload(unique_identifier=uid, attribute=renamed),
        )
        assert modified.unique_identifier == uid and modified.attribute.attribute_index.value == 0
        assert modified.attribute.attribute_value.name_value.value == "renamed"
        deleted = owner.proxy.send_request_payload(
            enums.Operation.DELETE_ATTRIBUTE,
            payloads.DeleteAttributeRequestPayload(unique_identifier=uid, attribute_name="Name", attribute_index=0),
        )
        assert deleted.attribute.attribute_index.value == 0
        assert deleted.attribute.attribute_value.name_value.value == "renamed"  # what it removed
        assert owner.get_attributes(uid, ["Name"])[1] == []
        with pytest.raises(OperationFailure) as none_left:
            owner.proxy.send_request_payload(
                enums.Operation.DELETE_ATTRIBUTE,
                payloads.DeleteAttributeRequestPayload(unique_identifier=uid, attribute_name="Name", attribute_index=0),
            )
        assert none_left.value.reason == enums.ResultReason.ITEM_NOT_FOUND
