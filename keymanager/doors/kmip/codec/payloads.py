"""PyKMIP's payloads as the door's requests (``doors/kmip/requests.py``), and the door's answers as
PyKMIP's payloads: one reader and one writer per operation, field for field, no rule of its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kmip.core import attributes as kmip_attributes
from kmip.core import enums, misc, primitives, utils
from kmip.core import objects as kmip_objects
from kmip.core.messages import contents, payloads
from kmip.pie import factory as pie_factory
from kmip.pie import objects as pie_objects

from keymanager.doors.kmip import requests as rq
from keymanager.doors.kmip import spec
from keymanager.doors.kmip.codec import attributes as codec_attributes
from keymanager.doors.kmip.codec.attributes import named, parameters

Op = spec.Operation
_FACTORY = pie_factory.ObjectFactory()


def _uid(given: Any) -> str | None:
    """A unique identifier as text (PyKMIP gives a text or its primitive)."""
    value = getattr(given, "value", given)
    return None if value is None else str(value)


def _template(given: Any) -> rq.Template | None:
    if given is None:
        return None
    return rq.Template(tuple(codec_attributes.read(a) for a in given.attributes), named=bool(given.names))


def _secret(given: Any) -> rq.Secret | None:
    """The value of a registered object (PyKMIP's object read as its ``pie`` object)."""
    if given is None:
        return None
    try:
        pie = _FACTORY.convert(given)
    except (TypeError, ValueError, AttributeError):
        return rq.Secret(readable=False)
    algorithm = getattr(pie, "cryptographic_algorithm", None)
    kind = (
        getattr(pie, "data_type", None) or getattr(pie, "opaque_type", None) or getattr(pie, "certificate_type", None)
    )
    return rq.Secret(
        readable=True,
        value=bytes(pie.value),
        cryptographic_algorithm=None if algorithm is None else int(algorithm.value),
        cryptographic_length=getattr(pie, "cryptographic_length", None),
        value_type=None if kind is None else int(kind.value),
    )


def _cipher(p: Any) -> rq.CipherRequest:
    return rq.CipherRequest(
        unique_identifier=_uid(p.unique_identifier),
        cryptographic_parameters=parameters(p.cryptographic_parameters),
        data=p.data,
        iv_counter_nonce=p.iv_counter_nonce,
        auth_additional_data=p.auth_additional_data,
        auth_tag=getattr(p, "auth_tag", None),
        mac_data=getattr(p, "mac_data", None),
    )


def _signature(p: Any) -> rq.SignatureRequest:
    return rq.SignatureRequest(
        unique_identifier=_uid(p.unique_identifier),
        cryptographic_parameters=parameters(p.cryptographic_parameters),
        data=getattr(p.data, "value", p.data),  # PyKMIP's MAC payload holds primitives
        signature_data=getattr(p, "signature_data", None),
    )


def _revoke(p: Any) -> rq.RevokeRequest:
    code = getattr(getattr(p.revocation_reason, "revocation_code", None), "value", None)
    occurred = getattr(p.compromise_occurrence_date, "value", None)
    return rq.RevokeRequest(
        _uid(p.unique_identifier), named(spec.RevocationReasonCode, code), None if occurred is None else int(occurred)
    )


def _change(p: Any) -> rq.AttributeChange:
    attribute = getattr(p, "attribute", None)
    reference = getattr(getattr(p, "attribute_reference", None), "attribute_name", None)
    return rq.AttributeChange(
        unique_identifier=_uid(p.unique_identifier),
        attribute=None if attribute is None else codec_attributes.read(attribute),
        attribute_name=getattr(p, "attribute_name", None),
        attribute_index=getattr(p, "attribute_index", None),
        new_attribute=codec_attributes.read_tagged(getattr(p, "new_attribute", None)),
        current_attribute=codec_attributes.read_tagged(getattr(p, "current_attribute", None)),
        reference=str(reference) if reference else None,
    )


_READERS: dict[spec.Operation, Callable[[Any], Any]] = {
    Op.CREATE: lambda p: rq.CreateRequest(named(spec.ObjectType, p.object_type), _template(p.template_attribute)),
    Op.CREATE_KEY_PAIR: lambda p: rq.CreateKeyPairRequest(
        _template(p.common_template_attribute),
        _template(p.private_key_template_attribute),
        _template(p.public_key_template_attribute),
    ),
    Op.REGISTER: lambda p: rq.RegisterRequest(
        named(spec.ObjectType, p.object_type), _template(p.template_attribute), _secret(p.managed_object)
    ),
    Op.ACTIVATE: lambda p: rq.Named(_uid(p.unique_identifier)),
    Op.DESTROY: lambda p: rq.Named(_uid(p.unique_identifier)),
    Op.GET_ATTRIBUTE_LIST: lambda p: rq.Named(_uid(p.unique_identifier)),
    Op.REVOKE: _revoke,
    Op.GET: lambda p: rq.GetRequest(
        _uid(p.unique_identifier),
        named(spec.KeyFormatType, p.key_format_type),
        p.key_wrapping_specification is not None,
    ),
    Op.ENCRYPT: _cipher,
    Op.DECRYPT: _cipher,
    Op.MAC_VERIFY: _cipher,
    Op.MAC: _signature,
    Op.SIGN: _signature,
    Op.SIGNATURE_VERIFY: _signature,
    Op.LOCATE: lambda p: rq.LocateRequest(
        tuple(codec_attributes.read(a) for a in p.attributes or []), p.offset_items, p.maximum_items
    ),
    Op.GET_ATTRIBUTES: lambda p: rq.AttributesRequest(_uid(p.unique_identifier), tuple(p.attribute_names or [])),
    Op.MODIFY_ATTRIBUTE: _change,
    Op.SET_ATTRIBUTE: _change,
    Op.DELETE_ATTRIBUTE: _change,
    Op.DISCOVER_VERSIONS: lambda p: rq.VersionsRequest(
        tuple((int(v.major), int(v.minor)) for v in p.protocol_versions or [])
    ),
    Op.QUERY: lambda p: rq.QueryRequest(tuple(named(spec.QueryFunction, f) for f in p.query_functions or [])),
}


def request(operation: spec.Operation, payload: Any) -> Any:
    """The door's request of PyKMIP's ``payload`` of ``operation``."""
    return _READERS[operation](payload)


# -- answers ------------------------------------------------------------------------------------


def _got(answer: rq.Got) -> payloads.GetResponsePayload:
    kind = enums.ObjectType(answer.object_type.value)
    algorithm = (
        None
        if answer.cryptographic_algorithm is None
        else enums.CryptographicAlgorithm(answer.cryptographic_algorithm.value)
    )
    pie: Any
    if kind is enums.ObjectType.SYMMETRIC_KEY:
        pie = pie_objects.SymmetricKey(algorithm, answer.cryptographic_length, answer.value)
    elif kind is enums.ObjectType.PUBLIC_KEY:
        assert answer.key_format_type is not None
        key_format = enums.KeyFormatType(answer.key_format_type.value)
        pie = pie_objects.PublicKey(algorithm, answer.cryptographic_length, answer.value, key_format)
    elif kind is enums.ObjectType.SECRET_DATA:
        pie = pie_objects.SecretData(answer.value, enums.SecretDataType(answer.value_type))
    elif kind is enums.ObjectType.OPAQUE_DATA:
        pie = pie_objects.OpaqueObject(answer.value, enums.OpaqueDataType(answer.value_type))
    else:
        pie = pie_objects.X509Certificate(answer.value)
    return payloads.GetResponsePayload(
        object_type=kind, unique_identifier=answer.unique_identifier, secret=_FACTORY.convert(pie)
    )


def _query(answer: rq.QueryAnswer) -> payloads.QueryResponsePayload:
    found = payloads.QueryResponsePayload()
    if answer.operations is not None:
        found.operations = [enums.Operation(op.value) for op in answer.operations]
    if answer.object_types is not None:
        found.object_types = [enums.ObjectType(kind.value) for kind in answer.object_types]
    if answer.vendor_identification is not None:
        found.vendor_identification = answer.vendor_identification
    if answer.server_information:
        found.server_information = misc.ServerInformation()
    return found


def _attributes(operation: spec.Operation, answer: rq.AttributesAnswer) -> Any:
    uid = answer.unique_identifier
    if operation is Op.GET_ATTRIBUTES:
        every = [codec_attributes.build(a) for a in answer.attributes]
        return payloads.GetAttributesResponsePayload(unique_identifier=uid, attributes=every)
    (attribute,) = answer.attributes
    if operation is Op.ADD_ATTRIBUTE:  # the attribute as it came
        return AddAttributeResponse(uid, attribute.source or codec_attributes.build(attribute))
    if operation is Op.MODIFY_ATTRIBUTE:
        return payloads.ModifyAttributeResponsePayload(
            unique_identifier=uid, attribute=codec_attributes.build(attribute)
        )
    return payloads.DeleteAttributeResponsePayload(unique_identifier=uid, attribute=codec_attributes.build(attribute))


@dataclass
class AddAttributeResponse:
    """AddAttribute's answer: the identifier and the attribute added, written as PyKMIP writes structures
    (PyKMIP's codec has no payload for KMIP 1.x's AddAttribute)."""

    unique_identifier: str
    attribute: Any

    def write(
        self, stream: utils.BytearrayStream, kmip_version: enums.KMIPVersion = enums.KMIPVersion.KMIP_1_0
    ) -> None:
        inner = utils.BytearrayStream()
        primitives.TextString(self.unique_identifier, enums.Tags.UNIQUE_IDENTIFIER).write(
            inner, kmip_version=kmip_version
        )
        self.attribute.write(inner, kmip_version=kmip_version)
        header = enums.Tags.RESPONSE_PAYLOAD.value.to_bytes(3, "big") + b"\x01" + len(inner.buffer).to_bytes(4, "big")
        stream.write(header + bytes(inner.buffer))


_IDENTIFIED: dict[spec.Operation, Callable[[str], Any]] = {
    Op.REGISTER: lambda uid: payloads.RegisterResponsePayload(unique_identifier=uid),
    Op.ACTIVATE: lambda uid: payloads.ActivateResponsePayload(unique_identifier=kmip_attributes.UniqueIdentifier(uid)),
    Op.REVOKE: lambda uid: payloads.RevokeResponsePayload(unique_identifier=kmip_attributes.UniqueIdentifier(uid)),
    Op.DESTROY: lambda uid: payloads.DestroyResponsePayload(unique_identifier=kmip_attributes.UniqueIdentifier(uid)),
    Op.SET_ATTRIBUTE: lambda uid: payloads.SetAttributeResponsePayload(unique_identifier=uid),
    Op.MODIFY_ATTRIBUTE: lambda uid: payloads.ModifyAttributeResponsePayload(unique_identifier=uid),
    Op.DELETE_ATTRIBUTE: lambda uid: payloads.DeleteAttributeResponsePayload(unique_identifier=uid),
}
_WRITERS: dict[type, Callable[[Any], Any]] = {
    rq.Created: lambda a: payloads.CreateResponsePayload(
        object_type=enums.ObjectType(a.object_type.value), unique_identifier=a.unique_identifier
    ),
    rq.PairCreated: lambda a: payloads.CreateKeyPairResponsePayload(
        private_key_unique_identifier=a.private_key_unique_identifier,
        public_key_unique_identifier=a.public_key_unique_identifier,
    ),
    rq.Got: _got,
    rq.EncryptResponse: lambda a: payloads.EncryptResponsePayload(
        unique_identifier=a.unique_identifier, data=a.data, iv_counter_nonce=a.iv_counter_nonce, auth_tag=a.auth_tag
    ),
    rq.DecryptResponse: lambda a: payloads.DecryptResponsePayload(unique_identifier=a.unique_identifier, data=a.data),
    rq.MacResponse: lambda a: payloads.MACResponsePayload(
        unique_identifier=kmip_attributes.UniqueIdentifier(a.unique_identifier),
        mac_data=kmip_objects.MACData(a.mac_data),
    ),
    rq.Signed: lambda a: payloads.SignResponsePayload(
        unique_identifier=a.unique_identifier, signature_data=a.signature_data
    ),
    rq.SignatureVerified: lambda a: payloads.SignatureVerifyResponsePayload(
        unique_identifier=a.unique_identifier,
        validity_indicator=enums.ValidityIndicator.VALID if a.valid else enums.ValidityIndicator.INVALID,
    ),
    rq.Located: lambda a: payloads.LocateResponsePayload(
        located_items=a.located_items, unique_identifiers=list(a.unique_identifiers)
    ),
    rq.AttributeNames: lambda a: payloads.GetAttributeListResponsePayload(
        unique_identifier=a.unique_identifier, attribute_names=list(a.attribute_names)
    ),
    rq.Versions: lambda a: payloads.DiscoverVersionsResponsePayload(
        protocol_versions=[contents.ProtocolVersion(*version) for version in a.protocol_versions]
    ),
    rq.QueryAnswer: _query,
}
FAST_ANSWERS = (rq.EncryptResponse, rq.DecryptResponse, rq.MacVerified)
"""The answers the hot path writes itself (:func:`written` leaves them as they are)."""


def written(operation: spec.Operation | None, answer: Any) -> Any:
    """The payload to write for the door's ``answer`` to ``operation``: PyKMIP's (the hot path's
    answers as they are, for :mod:`.fast`; :func:`wire` makes PyKMIP's of them)."""
    if answer is None or isinstance(answer, FAST_ANSWERS):
        return answer
    if isinstance(answer, rq.Identified):
        assert operation is not None
        return _IDENTIFIED[operation](answer.unique_identifier)
    if isinstance(answer, rq.AttributesAnswer):
        assert operation is not None
        return _attributes(operation, answer)
    return _WRITERS[type(answer)](answer)


def wire(payload: Any) -> Any:
    """PyKMIP's payload of a payload :func:`written` left to the hot path (MACVerify's has none)."""
    if isinstance(payload, (rq.EncryptResponse, rq.DecryptResponse)):
        return _WRITERS[type(payload)](payload)
    return payload
