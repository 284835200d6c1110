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
