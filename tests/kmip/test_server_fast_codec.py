"""The hot path of the codec (``doors/kmip/codec/fast.py``) equals PyKMIP's on every message it takes:
the same request fields read, the same response bytes written; every other message is left to PyKMIP."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from kmip.core import attributes, enums, objects
from kmip.core.messages import payloads

from keymanager.doors.kmip import spec
from keymanager.doors.kmip.codec import fast, messages
from keymanager.doors.kmip.codec.messages import Item, KmipRefusal, Reason, Result
from keymanager.doors.kmip.requests import DecryptResponse, EncryptResponse
from tests.kmip.server_fixtures import request_message

SERVED = frozenset(spec.Operation)
VERSIONS = [(1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (2, 0)]
UID = "0123456789abcdef0123456789abcdef"


def _parameters(**fields: Any) -> attributes.CryptographicParameters:
    return attributes.CryptographicParameters(**fields)


PARAMETERS = [
    None,
    _parameters(),
    _parameters(
        block_cipher_mode=enums.BlockCipherMode.CBC,
        padding_method=enums.PaddingMethod.PKCS5,
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES,
        random_iv=True,
    ),
    _parameters(block_cipher_mode=enums.BlockCipherMode.GCM, tag_length=16, iv_length=96, random_iv=False),
]


def _requests() -> list[tuple[str, bytes]]:
    found = []
    for version, parameters, iv, aad in itertools.product(VERSIONS, PARAMETERS, (None, b"i" * 16), (None, b"aad")):
        encrypt = payloads.EncryptRequestPayload(
            unique_identifier=UID,
            cryptographic_parameters=parameters,
            data=b"x" * 1000,
            iv_counter_nonce=iv,
            auth_additional_data=aad,
        )
        decrypt = payloads.DecryptRequestPayload(
            unique_identifier=UID,
            cryptographic_parameters=parameters,
            data=b"y" * 64,
            iv_counter_nonce=iv,
            auth_additional_data=aad,
            auth_tag=b"t" * 16 if aad else None,
        )
        name = f"{version}-{parameters is not None}-{iv is not None}-{aad is not None}"
        found.append((f"encrypt-{name}", request_message([(enums.Operation.ENCRYPT, encrypt)], version)))
        found.append((f"decrypt-{name}", request_message([(enums.Operation.DECRYPT, decrypt)], version)))
    batch = [
        (enums.Operation.ENCRYPT, payloads.EncryptRequestPayload(data=b"a")),
        (enums.Operation.DECRYPT, payloads.DecryptRequestPayload(unique_identifier=UID, data=b"b")),
    ]
    found.append(("batch-continue", request_message(batch, (1, 4), continue_on_error=True)))
    return found


REQUESTS = _requests()


@pytest.mark.parametrize(("name", "message"), REQUESTS, ids=[name for name, _ in REQUESTS])
def test_the_hot_path_reads_what_pykmip_reads(name: str, message: bytes) -> None:
    ours = fast.decode(message, SERVED, 1000)
    theirs = messages.decode(message, SERVED, 1000)
    assert ours is not None, name
    assert (ours.version, ours.stop_on_error, ours.max_response_size) == (
        theirs.version,
        theirs.stop_on_error,
        theirs.max_response_size,
    )
    assert len(ours.items) == len(theirs.items)
    for mine, pykmip in zip(ours.items, theirs.items, strict=True):
        assert (mine.operation, mine.batch_id, pykmip.refusal) == (pykmip.operation, pykmip.batch_id, None)
        assert _fields(mine.payload) == _fields(pykmip.payload)


def test_other_messages_are_left_to_pykmip() -> None:
    create = payloads.CreateRequestPayload(
        object_type=enums.ObjectType.SYMMETRIC_KEY, template_attribute=objects.TemplateAttribute()
    )
    hashed = payloads.EncryptRequestPayload(
        data=b"x", cryptographic_parameters=_parameters(hashing_algorithm=enums.HashingAlgorithm.SHA_256)
    )
    for message in (
        request_message([(enums.Operation.CREATE, create)]),
        request_message([(enums.Operation.ENCRYPT, hashed)]),
        _version_3(request_message([(enums.Operation.ENCRYPT, payloads.EncryptRequestPayload(data=b"x"))])),
    ):
        assert fast.decode(message, SERVED, 1000) is None


def _version_3(message: bytes) -> bytes:
    """``message`` saying protocol version 3 (its major number: the first value of its header)."""
    return message[:32] + (3).to_bytes(4, "big") + message[36:]


def _results() -> list[tuple[str, list[Result]]]:
    encrypt, decrypt = Item(spec.Operation.ENCRYPT, None), Item(spec.Operation.DECRYPT, b"7")
    answers = {
        "encrypt": Result(encrypt, EncryptResponse(unique_identifier=UID, data=b"c" * 1008)),
        "encrypt-iv": Result(
            encrypt, EncryptResponse(unique_identifier=UID, data=b"c" * 16, iv_counter_nonce=b"i" * 16)
        ),
        "encrypt-gcm": Result(
            encrypt,
            EncryptResponse(unique_identifier=UID, data=b"c" * 5, iv_counter_nonce=b"n" * 12, auth_tag=b"t" * 16),
        ),
        "decrypt": Result(decrypt, DecryptResponse(unique_identifier=UID, data=b"p" * 33)),
        "refused": Result(decrypt, refusal=KmipRefusal(Reason.CRYPTOGRAPHIC_FAILURE, "the decryption failed")),
        "unknown": Result(Item(None, None), refusal=KmipRefusal(Reason.INVALID_MESSAGE, "unreadable")),
    }
    return [(f"{name}-{v}", [result]) for name, result in answers.items() for v in ("",)] + [
        ("all", list(answers.values()))
    ]


@pytest.mark.parametrize("version", VERSIONS, ids=str)
@pytest.mark.parametrize(("name", "results"), _results(), ids=[name for name, _ in _results()])
def test_the_hot_path_writes_what_pykmip_writes(
    monkeypatch: pytest.MonkeyPatch, version: tuple[int, int], name: str, results: list[Result]
) -> None:
    monkeypatch.setattr(fast.time, "time", lambda: 1_764_590_400.5)
    monkeypatch.setattr(messages.time, "time", lambda: 1_764_590_400.5)
    ours = fast.encode(version, results, None)
    assert ours is not None
    assert ours == messages.encode(version, results, None)


def _fields(payload: Any) -> dict[str, Any]:
    """The request fields the operations read, as plain values (PyKMIP's payloads answer them so too)."""
    parameters = payload.cryptographic_parameters
    return {
        "uid": getattr(payload.unique_identifier, "value", payload.unique_identifier),
        "data": payload.data,
        "iv": payload.iv_counter_nonce,
        "aad": payload.auth_additional_data,
        "tag": getattr(payload, "auth_tag", None),
        "parameters": None
        if parameters is None
        else {
            name: getattr(parameters, name)
            for name in (
                "block_cipher_mode",
                "padding_method",
                "cryptographic_algorithm",
                "random_iv",
                "tag_length",
                "iv_length",
            )
        },
    }
