"""No secret of a request (plaintext, tokens, the PIN) reaches the logs, on success or failure."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from tests.api.support import b64, use_policy
from tests.conftest import TEST_PIN, TEST_SO_PIN, auth, make_settings

CARD = "4111111111111111"
DB_PASSWORD = "db-password-5120"


def test_no_secret_in_logs(
    caplog: pytest.LogCaptureFixture,
    client: TestClient,
    hsm: Hsm,
    admin_token: str,
    admin: dict[str, str],
    new_key: Callable[..., dict[str, Any]],
    tmp_path: Path,
) -> None:
    for name in ["", *logging.root.manager.loggerDict]:
        caplog.set_level(logging.DEBUG, logger=name)

    response = client.post("/v1/principals", json={"name": "billing", "role": "app"}, headers=admin)
    token = response.json()["token"]
    billing = auth(token)
    other = client.post("/v1/principals", json={"name": "other", "role": "app"}, headers=admin).json()["token"]
    secrets = [CARD, b64(CARD.encode()), admin_token, token, other, TEST_PIN, TEST_SO_PIN, DB_PASSWORD]

    ciphertexts = []
    for algorithm in ("AES_256_CBC_HMAC_SHA256", "AES_256_GCM"):
        name = algorithm.lower().replace("_", "-")
        new_key(name, use_policy("billing"), algorithm)
        response = client.post(
            f"/v1/keys/{name}/encrypt", json={"plaintext": b64(CARD.encode()), "context": {"t": "c"}}, headers=billing
        )
        assert response.status_code == 200
        text = response.json()["ciphertext"]
        ciphertexts.append(text)
        assert client.post("/v1/decrypt", json={"ciphertext": text, "context": {"t": "c"}}, headers=billing).json() == {
            "plaintext": b64(CARD.encode())
        }
        # Failures: wrong context, tampered, other principal, bad tokens, bad input.
        assert client.post("/v1/decrypt", json={"ciphertext": text}, headers=billing).status_code == 400
        tampered = text[:-6] + ("A" if text[-6] != "A" else "B") + text[-5:]
        assert client.post("/v1/decrypt", json={"ciphertext": tampered}, headers=billing).status_code == 400
        assert client.post("/v1/decrypt", json={"ciphertext": text}, headers=auth(other)).status_code == 403
        response = client.post(f"/v1/keys/{name}/encrypt", json={"plaintext": int(CARD)}, headers=billing)
        assert response.status_code == 422
        response = client.post(f"/v1/keys/{name}/encrypt", json={"plaintext": CARD + "!"}, headers=billing)
        assert response.status_code == 400
        response = client.post(f"/v1/keys/{name}/encrypt", json={"plaintext": CARD, "secret": CARD}, headers=billing)
        assert response.status_code == 422
        response = client.post(
            f"/v1/keys/{name}/encrypt", json={"plaintext": b64(CARD.encode() * 5_000)}, headers=billing
        )
        assert response.status_code == 413
    secrets += [text.rsplit(":", 1)[1] for text in ciphertexts]

    assert client.get("/v1/keys", headers=auth(token + "x")).status_code == 401
    assert client.get("/v1/keys", headers={"Authorization": f"Basic {token}"}).status_code == 401
    assert client.delete("/v1/principals/other", headers=admin).status_code == 204
    assert client.get("/v1/keys", headers=auth(other)).status_code == 401

    # The HSM session is lost and reopened (a new login with the PIN).
    hsm.call(lambda t: t._session.close())
    response = client.post("/v1/keys/aes-256-gcm/encrypt", json={"plaintext": b64(CARD.encode())}, headers=billing)
    assert response.status_code == 503
    response = client.post("/v1/keys/aes-256-gcm/encrypt", json={"plaintext": b64(CARD.encode())}, headers=billing)
    assert response.status_code == 200

    # The database is unreachable (its URL carries a password).
    settings = make_settings(tmp_path / "down", database_url=f"postgresql+psycopg://km:{DB_PASSWORD}@127.0.0.1:1/km")
    down = Services.build(settings, hsm=hsm, run_migrations=False)
    try:
        with TestClient(create_app(services=down), base_url="https://testserver") as down_client:
            response = down_client.post("/v1/decrypt", json={"ciphertext": ciphertexts[0]}, headers=billing)
            assert response.status_code == 503
            assert down_client.get("/v1/ready").status_code == 503
    finally:
        down.close()

    # The capture saw the failure paths and the SQL with its parameters, so it is no empty check.
    loggers = {record.name for record in caplog.records}
    assert {"keymanager.hsm.dispatch", "keymanager.db.engine", "sqlalchemy.engine.Engine"} <= loggers
    text = caplog.text + "\n".join(str(record.args) for record in caplog.records)
    for secret in secrets:
        assert secret not in text
