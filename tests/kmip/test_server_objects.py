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
