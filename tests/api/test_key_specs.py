"""``GET /v1/key-specs`` serves the one table of key types, to every role, unaudited."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from keymanager.domain.key_specs import SPECS, KeyUsage
from tests.api.support import assert_error
from tests.conftest import auth


def test_every_role_reads_the_table_as_it_is(
    client: TestClient, admin: dict[str, str], new_principal: Callable[..., str]
) -> None:
    for role in ("app", "auditor", "admin"):
        headers = admin if role == "admin" else auth(new_principal(f"specs-{role}", role))
        answer = client.get("/v1/key-specs", headers=headers)
        assert answer.status_code == 200, answer.text
        rows = answer.json()["specs"]
        assert [row["name"] for row in rows] == [a.value for a in SPECS]
    by_name = {row["name"]: row for row in rows}
    rsa = by_name["RSA_2048"]
    assert (rsa["kms_key_spec"], rsa["asymmetric"], rsa["default_usage"], rsa["key_bits"]) == (
        "RSA_2048",
        True,
        None,
        2048,
    )
    assert "RSASSA_PSS_SHA_256" in rsa["usages"]["SIGN_VERIFY"]
    assert rsa["usages"]["ENCRYPT_DECRYPT"] == ["RSAES_OAEP_SHA_1", "RSAES_OAEP_SHA_256"]
    p256 = by_name["ECC_NIST_P256"]
    assert (p256["curve"], p256["key_bits"]) == ("secp256r1", None)
    assert set(p256["usages"]) == {KeyUsage.SIGN_VERIFY.value, KeyUsage.KEY_AGREEMENT.value}
    gcm = by_name["AES_128_GCM"]
    assert (gcm["kms_key_spec"], gcm["default_usage"], gcm["key_bits"]) == (None, "ENCRYPT_DECRYPT", 128)


def test_a_stranger_is_refused_and_no_record_is_written(client: TestClient, admin: dict[str, str]) -> None:
    assert_error(client.get("/v1/key-specs"), 401, "unauthenticated")
    assert_error(client.get("/v1/key-specs", headers=auth("not-a-token")), 401, "unauthenticated")
    assert client.get("/v1/key-specs", headers=admin).status_code == 200
    records = client.get("/v1/audit", params={"action": "key_spec.list"}, headers=admin).json()["records"]
    assert records == []


def test_every_row_serves_how_the_doors_name_it(client: TestClient, admin: dict[str, str]) -> None:
    rows = {row["name"]: row for row in client.get("/v1/key-specs", headers=admin).json()["specs"]}
    for algorithm, spec in SPECS.items():
        row = rows[algorithm.value]
        served = (row["mode"], row["transit_type"], row["xks_spec"], row["kmip_algorithm"], row["kmip_length"])
        mode = None if spec.mode is None else spec.mode.value
        assert served == (mode, spec.transit_type, spec.xks_spec, spec.kmip_algorithm, spec.kmip_length), algorithm
    gcm = rows["AES_256_GCM"]  # written out, so a column served wrong everywhere still fails
    assert (gcm["mode"], gcm["transit_type"], gcm["xks_spec"], gcm["kmip_algorithm"], gcm["kmip_length"]) == (
        "GCM",
        "aes256-gcm96",
        "AES_256",
        "AES",
        256,
    )
    p256 = rows["ECC_NIST_P256"]
    assert (p256["mode"], p256["transit_type"], p256["xks_spec"], p256["kmip_algorithm"], p256["kmip_length"]) == (
        None,
        "ecdsa-p256",
        None,
        "EC",
        256,
    )
    ff1 = rows["FF1_AES_256"]
    assert (ff1["mode"], ff1["transit_type"], ff1["xks_spec"], ff1["kmip_algorithm"], ff1["kmip_length"]) == (
        None,
        None,
        None,
        None,
        None,
    )
