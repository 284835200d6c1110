"""Hardening III, items 1 and 5 (issue 41): one key, one mode, the nonce always ours; one lifecycle.

The probe's attack, from outside: an app named only for ``encrypt`` on a REST-made ``AES_256_GCM``
key sent KMIP Encrypt with the nonce of another principal's ciphertext and zeros as data, and XORed
the answer into the victim's ciphertext (GCM's keystream again: the plaintext); a second route ran
KMIP AES-CBC on the same GCM key with IV = nonce‖counter, a raw AES block oracle. Here every caller
IV is refused by name, a key is used only in its spec's mode (a foreign mode refused naming the
key's), per spec of each kind, and a raw AES-CBC-PAD key (what KMIP's Create makes unless GCM is
named) serves no other door. Then the lifecycle: KMIP Destroy waits ``KM_MIN_PENDING_DAYS`` as REST
does, and a key revoked as compromised is never enabled again.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kmip.core import attributes, enums
from kmip.core.messages import messages, payloads
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip import server_fixtures
from tests.kmip.conftest import OURS
from tests.kmip.server_fixtures import (
    OWNER,
    STRANGER,
    KmipServer,
    create_aes,
    kmip_server,
    read_response,
    request_message,
)
from tests.support.server_pool import ServerPool

__all__ = ["kmip_server"]

ADMIN = "kmip-admin"
GCM_BITS = (128, 192, 256)


def _parameters(mode: enums.BlockCipherMode | None, **more: Any) -> attributes.CryptographicParameters:
    return attributes.CryptographicParameters(
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES, block_cipher_mode=mode, **more
    )


def _item(server: KmipServer, who: str, operation: enums.Operation, payload: Any) -> messages.ResponseBatchItem:
    with server.tls(who) as raw:
        raw.sendall(request_message([(operation, payload)], (1, 4)))
        item: messages.ResponseBatchItem = read_response(raw).batch_items[0]
    return item


def _encrypt(server: KmipServer, who: str, uid: str, data: bytes, **fields: Any) -> messages.ResponseBatchItem:
    fields.setdefault("cryptographic_parameters", _parameters(enums.BlockCipherMode.GCM, tag_length=16))
    return _item(
        server, who, enums.Operation.ENCRYPT, payloads.EncryptRequestPayload(unique_identifier=uid, data=data, **fields)
    )


def _refused(item: messages.ResponseBatchItem, *words: str) -> None:
    assert item.result_status.value == enums.ResultStatus.OPERATION_FAILED, item.response_payload
    assert item.result_reason.value == enums.ResultReason.INVALID_FIELD, item.result_message
    for word in words:
        assert word in item.result_message.value, item.result_message.value


def _rest_key(server: KmipServer, algorithm: str, policy: dict[str, list[str]]) -> str:
    with server.admin() as rest:
        made = rest.post(
            "/v1/keys", json={"name": f"one-mode-{secrets.token_hex(4)}", "algorithm": algorithm, "policy": policy}
        )
    assert made.status_code == 201, made.text
    uid: str = made.json()["id"]
    return uid


def test_the_probes_nonce_reuse_attack_is_refused(kmip_server: KmipServer) -> None:
    victim_data = b"4111-1111-1111-1111 exp 12/29 cvv 123"
    uid = _rest_key(kmip_server, "AES_256_GCM", {"encrypt": [OWNER, STRANGER], "decrypt": [OWNER]})
    sealed = _encrypt(kmip_server, OWNER, uid, victim_data)
    assert sealed.result_status.value == enums.ResultStatus.SUCCESS, sealed.result_message
    nonce = bytes(sealed.response_payload.iv_counter_nonce)
    victim = bytes(sealed.response_payload.data)

    # The attack: the victim's nonce, zeros as data: refused, naming the field.
    _refused(_encrypt(kmip_server, STRANGER, uid, bytes(len(victim)), iv_counter_nonce=nonce), "IV/Counter/Nonce")
    # The second route: CBC with IV = nonce‖counter on the GCM key: refused for the IV, and for the mode.
    block = nonce + (2).to_bytes(4, "big")
    cbc = _parameters(enums.BlockCipherMode.CBC, padding_method=enums.PaddingMethod.PKCS5)
    _refused(_encrypt(kmip_server, STRANGER, uid, bytes(16), cryptographic_parameters=cbc, iv_counter_nonce=block))
    _refused(_encrypt(kmip_server, STRANGER, uid, bytes(16), cryptographic_parameters=cbc), "AES_256_GCM", "GCM only")
    # Random IV off is the same request in other words.
    off = _parameters(enums.BlockCipherMode.GCM, random_iv=False)
    _refused(_encrypt(kmip_server, STRANGER, uid, bytes(16), cryptographic_parameters=off), "Random IV")
    # What the attacker may still do is encrypt, under a nonce of the server's: its keystream is not the victim's.
    mine = _encrypt(kmip_server, STRANGER, uid, bytes(len(victim)))
    assert mine.result_status.value == enums.ResultStatus.SUCCESS, mine.result_message
    assert bytes(mine.response_payload.iv_counter_nonce) != nonce
    keystream = bytes(mine.response_payload.data)
    assert bytes(a ^ b for a, b in zip(keystream, victim, strict=True)) != victim_data


@pytest.mark.parametrize("bits", GCM_BITS)
def test_a_gcm_key_is_used_in_gcm_only_and_never_with_a_callers_iv(kmip_server: KmipServer, bits: int) -> None:
    uid = create_aes(kmip_server, OWNER, bits)  # AES_<bits>_GCM
    for mode in (enums.BlockCipherMode.CBC, enums.BlockCipherMode.ECB, enums.BlockCipherMode.CTR):
        item = _encrypt(kmip_server, OWNER, uid, b"sixteen bytes!!!", cryptographic_parameters=_parameters(mode))
        _refused(item, mode.name) if mode is not enums.BlockCipherMode.CBC else _refused(item, f"AES_{bits}_GCM")
        decrypt = payloads.DecryptRequestPayload(
            unique_identifier=uid,
            cryptographic_parameters=_parameters(mode),
            data=bytes(16),
            iv_counter_nonce=bytes(16),
        )
        assert _item(kmip_server, OWNER, enums.Operation.DECRYPT, decrypt).result_status.value == (
            enums.ResultStatus.OPERATION_FAILED
        )
    _refused(_encrypt(kmip_server, OWNER, uid, b"x", iv_counter_nonce=bytes(12)), "IV/Counter/Nonce")
    own = _encrypt(kmip_server, OWNER, uid, b"x", cryptographic_parameters=None)  # none named: the key's GCM
    assert own.result_status.value == enums.ResultStatus.SUCCESS, own.result_message
    assert len(own.response_payload.iv_counter_nonce) == 12 and len(own.response_payload.auth_tag) == 16


@pytest.mark.parametrize("bits", GCM_BITS)
def test_a_raw_cbc_key_is_used_in_cbc_by_kmip_only(kmip_server: KmipServer, bits: int) -> None:
    uid = create_aes(kmip_server, OWNER, bits, mode=None)  # no mode named: AES_<bits>_CBC_PAD
    for mode in (enums.BlockCipherMode.GCM, enums.BlockCipherMode.ECB, enums.BlockCipherMode.CTR):
        item = _encrypt(kmip_server, OWNER, uid, b"x", cryptographic_parameters=_parameters(mode))
        _refused(item, f"AES_{bits}_CBC_PAD") if mode is enums.BlockCipherMode.GCM else _refused(item, mode.name)
    cbc = _parameters(enums.BlockCipherMode.CBC, padding_method=enums.PaddingMethod.PKCS5)
    _refused(_encrypt(kmip_server, OWNER, uid, b"x", cryptographic_parameters=cbc, iv_counter_nonce=bytes(16)))
    sealed = _encrypt(kmip_server, OWNER, uid, b"x", cryptographic_parameters=cbc)
    assert (
        sealed.result_status.value == enums.ResultStatus.SUCCESS and len(sealed.response_payload.iv_counter_nonce) == 16
    )

    # No other door uses it: REST's encrypt (the KMS door, data keys and Transit share its rule).
    with kmip_server.admin() as rest:
        admin = next(
            p["name"] for p in rest.get("/v1/principals").json() if p["role"] == "admin" and p["name"] != ADMIN
        )
        assert rest.patch(f"/v1/keys/{uid}", json={"policy": {"encrypt": [OWNER, admin]}}).status_code == 200
        native = rest.post(f"/v1/keys/{uid}/encrypt", json={"plaintext": "eA=="})
        assert native.status_code == 400, native.text
        assert "KMIP's Encrypt and Decrypt" in native.json()["error"]["message"], native.text
        assert rest.patch(f"/v1/keys/{uid}", json={"policy": {"generate_data_key": [admin]}}).status_code == 200
        data_key = rest.post(f"/v1/keys/{uid}/datakey", json={})
        assert data_key.status_code == 400 and "raw CBC_PAD key" in data_key.json()["error"]["message"], data_key.text


def test_compromised_is_terminal_on_every_door(kmip_server: KmipServer) -> None:
    uid = _rest_key(kmip_server, "AES_256_GCM", {})
    with kmip_server.connected(ADMIN) as client:
        client.revoke(enums.RevocationReasonCode.KEY_COMPROMISE, uid)
    with kmip_server.admin() as rest:
        assert rest.get(f"/v1/keys/{uid}").json()["kmip_state"] == "compromised"
        enabled = rest.patch(f"/v1/keys/{uid}", json={"enabled": True})
        assert enabled.status_code == 409 and "compromised" in enabled.json()["error"]["message"], enabled.text
        assert rest.get(f"/v1/keys/{uid}").json()["state"] == "disabled"


@pytest.fixture(scope="module")
def windowed(server_pool: ServerPool) -> Iterator[KmipServer]:
    """A KMIP server whose deletion window is a week (``OURS`` has none, for the suites that destroy)."""
    https = server_pool.get(kmip=True, **{**OURS, "KM_MIN_PENDING_DAYS": "7"})
    yield server_fixtures.with_principals(https, int(https.env["KM_KMIP_PORT"]), https.var_dir.parent, [ADMIN])


def test_kmip_destroy_waits_the_deletion_window_of_every_door(windowed: KmipServer) -> None:
    uid = _rest_key(windowed, "AES_256_GCM", {})
    with windowed.connected(ADMIN) as client:
        client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, uid)
        client.destroy(uid)
        with pytest.raises(KmipOperationFailure):  # its deletion is pending: its date stays
            client.destroy(uid)
        state = client.get_attributes(uid, ["State"])[1][0].attribute_value.value
    assert state == enums.State.DEACTIVATED
    with windowed.admin() as rest:
        key = rest.get(f"/v1/keys/{uid}").json()
        assert key["state"] == "pending_deletion", key
        when = datetime.fromisoformat(key["deletion_date"].replace("Z", "+00:00"))
        assert when >= datetime.now(UTC) + timedelta(days=7) - timedelta(minutes=5), key["deletion_date"]
        assert rest.post(f"/v1/keys/{uid}/cancel-deletion").json()["state"] == "disabled"
