"""Every KMIP decryption failure answers alike, so the KMIP door is no padding or tag oracle.

Two AES keys, a raw AES-CBC-PAD and an AES-GCM one (each with a second of its kind, whose
ciphertexts it is given: one key, one mode), of the owner's, the IVs the server's, over raw TTLV in
KMIP 1.4 (the version with GCM's AAD and tag fields). AES-CBC-PKCS5: a bad padding (the last byte
of a two-block message's padding turned 0x00 through the block before it), a wrong IV (a one-block
message, whose padding the IV reaches: its last byte turned 0xF8), the ciphertext cut by a byte and
by a block, ciphertexts of another key. AES-GCM: a wrong tag, a wrong AAD, the AAD left out, a
wrong IV, the ciphertext cut by a byte, a ciphertext of another key. Each failed item's whole
result (operation, status, reason, message, no payload, as written on the wire) is the same, and
each failure's audit record is the same but for its time and request id: the reason's name, no
more, and none of the bytes sent.
"""

from __future__ import annotations

import base64
import secrets
import ssl
from typing import Any

from kmip import enums
from kmip.core import attributes, utils
from kmip.core.messages import messages, payloads

from tests.kmip.server_fixtures import OWNER, KmipServer, create_aes, kmip_server, read_response, request_message

__all__ = ["kmip_server"]

VERSION = (1, 4)
PER_REQUEST = {"time", "request_id", "position", "chain", "seq", "prev_hash", "hash", "seal"}
"""Fields of an audit record that differ from one request to the next whatever its outcome."""


def _cbc() -> attributes.CryptographicParameters:
    return attributes.CryptographicParameters(
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES,
        block_cipher_mode=enums.BlockCipherMode.CBC,
        padding_method=enums.PaddingMethod.PKCS5,
    )


def _gcm() -> attributes.CryptographicParameters:
    return attributes.CryptographicParameters(
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES,
        block_cipher_mode=enums.BlockCipherMode.GCM,
        tag_length=16,
    )


def _one(raw: ssl.SSLSocket, operation: enums.Operation, payload: Any) -> messages.ResponseBatchItem:
    raw.sendall(request_message([(operation, payload)], VERSION))
    item: messages.ResponseBatchItem = read_response(raw).batch_items[0]
    return item


def _encrypt(raw: ssl.SSLSocket, uid: str, gcm: bool, data: bytes, aad: bytes = b"") -> tuple[bytes, bytes, bytes]:
    """The ciphertext of ``data`` under key ``uid``, the IV the server made, and GCM's tag (else ``b""``)."""
    payload = payloads.EncryptRequestPayload(
        unique_identifier=uid,
        cryptographic_parameters=_gcm() if gcm else _cbc(),
        data=data,
        auth_additional_data=aad or None,
    )
    item = _one(raw, enums.Operation.ENCRYPT, payload)
    assert item.result_status.value == enums.ResultStatus.SUCCESS, item.result_message
    sealed = item.response_payload
    return bytes(sealed.data), bytes(sealed.iv_counter_nonce), bytes(sealed.auth_tag or b"")


def _decrypt(
    raw: ssl.SSLSocket, uid: str, gcm: bool, data: bytes, iv: bytes, aad: bytes = b"", tag: bytes = b""
) -> messages.ResponseBatchItem:
    payload = payloads.DecryptRequestPayload(
        unique_identifier=uid,
        cryptographic_parameters=_gcm() if gcm else _cbc(),
        data=data,
        iv_counter_nonce=iv,
        auth_additional_data=aad or None,
        auth_tag=tag or None,
    )
    return _one(raw, enums.Operation.DECRYPT, payload)


def _wire(item: messages.ResponseBatchItem) -> bytes:
    """The batch item as the server wrote it: operation, status, reason, message and payload."""
    stream = utils.BytearrayStream()
    item.write(stream, kmip_version=enums.KMIPVersion.KMIP_1_4)
    return bytes(stream.buffer)


def _flip(data: bytes, at: int, mask: int) -> bytes:
    return data[:at] + bytes([data[at] ^ mask]) + data[at + 1 :]


def test_every_decryption_failure_answers_and_is_audited_alike(kmip_server: KmipServer) -> None:
    key, other = create_aes(kmip_server, OWNER, mode=None), create_aes(kmip_server, OWNER, mode=None)
    gcm_key, gcm_other = create_aes(kmip_server, OWNER), create_aes(kmip_server, OWNER)
    one_block, two_blocks = b"card 4111", b"x" * 20  # padded with 7 x 0x07; with 12 x 0x0c
    aad, text = b"hdr", b"pan"
    failures: dict[str, list[messages.ResponseBatchItem]] = {}
    with kmip_server.tls(OWNER) as raw:
        short, iv1, _ = _encrypt(raw, key, False, one_block)
        long, iv2, _ = _encrypt(raw, key, False, two_blocks)
        sealed, nonce, tag = _encrypt(raw, gcm_key, True, text, aad)
        assert _decrypt(raw, key, False, short, iv1).response_payload.data == one_block
        assert _decrypt(raw, key, False, long, iv2).response_payload.data == two_blocks
        assert _decrypt(raw, gcm_key, True, sealed, nonce, aad, tag).response_payload.data == text
        sent = [short, long, sealed, tag, iv1, iv2, nonce]
        cbc = {
            "CBC bad padding": (_flip(long, 15, 0x0C), iv2),
            "CBC wrong IV": (short, _flip(iv1, 15, 0xFF)),
            "CBC cut by a byte": (long[:-1], iv2),
            "CBC cut by a block": (long[:16], iv2),  # its first block ends "x": no padding
        }
        for name, (data, iv) in cbc.items():
            failures[name] = [_decrypt(raw, key, False, data, iv)]
        # Another key's ciphertext opens to bytes whose padding is right once in ~256: of four, the
        # ones that fail must fail alike, and one at least does.
        others = [_encrypt(raw, other, False, secrets.token_bytes(9))[:2] for _ in range(4)]
        tried = [_decrypt(raw, key, False, data, iv) for data, iv in others]
        failures["CBC another key's"] = [i for i in tried if i.result_status.value != enums.ResultStatus.SUCCESS]
        assert failures["CBC another key's"], "four of another key's ciphertexts all opened under this key"
        gcm = {
            "GCM wrong tag": (sealed, nonce, aad, _flip(tag, 0, 0x01)),
            "GCM wrong AAD": (sealed, nonce, b"hdx", tag),
            "GCM AAD left out": (sealed, nonce, b"", tag),
            "GCM wrong IV": (sealed, _flip(nonce, 0, 0x01), aad, tag),
            "GCM cut by a byte": (sealed[:-1], nonce, aad, tag),
            "GCM tag cut to 12 bytes": (sealed, nonce, aad, tag[:12]),
        }
        other_sealed, other_nonce, other_tag = _encrypt(raw, gcm_other, True, text, aad)
        gcm["GCM another key's"] = (other_sealed, other_nonce, aad, other_tag)
        sent += [other_sealed, other_tag, other_nonce, *(part for pair in others for part in pair)]
        for name, (data, iv, given_aad, given_tag) in gcm.items():
            failures[name] = [_decrypt(raw, gcm_key, True, data, iv, given_aad, given_tag)]

    answers = {name: {_wire(item) for item in items} for name, items in failures.items()}
    reference = failures["CBC bad padding"][0]
    assert reference.result_status.value == enums.ResultStatus.OPERATION_FAILED
    assert reference.result_reason.value == enums.ResultReason.CRYPTOGRAPHIC_FAILURE
    assert reference.response_payload is None
    assert all(found == {_wire(reference)} for found in answers.values()), {
        name: [(i.result_reason.value, i.result_message.value) for i in items] for name, items in failures.items()
    }

    count = sum(len(items) for items in failures.values())
    records = [r for r in kmip_server.audit("kmip.Decrypt") if r["key_id"] in (key, gcm_key) and r["outcome"] != "ok"]
    assert len(records) == count, records
    alike = [{field: value for field, value in r.items() if field not in PER_REQUEST | {"key_id"}} for r in records]
    assert all(record == alike[0] for record in alike), alike
    assert alike[0]["details"] == {"error": "CRYPTOGRAPHIC_FAILURE"}, alike[0]
    written = str(records)
    for value in sent:
        assert value.hex() not in written.lower() and base64.b64encode(value).decode() not in written
