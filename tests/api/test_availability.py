"""HSM and database outages answer 503 and heal without a restart; key creation is atomic."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pkcs11 import Attribute, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.api.app import create_app
from keymanager.db import Store, make_engine
from keymanager.errors import Conflict, DatabaseUnavailable
from keymanager.hsm import Hsm, operations
from keymanager.hsm.token import Token
from keymanager.services.container import Services
from tests.api.support import assert_error, b64, use_policy
from tests.conftest import auth, make_settings

CARD = b"4111111111111111"
UNREACHABLE_DB = "postgresql+psycopg://postgres@127.0.0.1:1/x"


def _lose_session(hsm: Hsm) -> None:
    """Close the adapter's PKCS#11 session underneath it, as a dropped HSM connection would."""
    hsm.call(lambda token: token._session.close())


@pytest.fixture
def billing(new_principal: Callable[..., str]) -> dict[str, str]:
    return auth(new_principal("billing"))


# -- HSM ------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM"])
def test_lost_hsm_session_is_503_then_recovers(
    client: TestClient,
    hsm: Hsm,
    new_key: Callable[..., dict[str, Any]],
    billing: dict[str, str],
    admin: dict[str, str],
    algorithm: str,
) -> None:
    new_key("cards", use_policy("billing"), algorithm)
    text = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing).json()["ciphertext"]

    _lose_session(hsm)
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
    assert_error(response, 503, "hsm_unavailable")
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
    assert response.status_code == 200, response.text

    _lose_session(hsm)
    assert_error(client.post("/v1/decrypt", json={"ciphertext": text}, headers=billing), 503, "hsm_unavailable")
    response = client.post("/v1/decrypt", json={"ciphertext": text}, headers=billing)
    assert response.json() == {"plaintext": b64(CARD)}

    _lose_session(hsm)
    response = client.get("/v1/ready")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "hsm": "unavailable", "database": "ok"}
    assert "Traceback" not in response.text
    assert client.get("/v1/ready").status_code == 200

    _lose_session(hsm)
    assert_error(client.post("/v1/keys", json={"name": "more"}, headers=admin), 503, "hsm_unavailable")
    assert_error(client.get("/v1/keys/more", headers=admin), 404, "key_not_found")
    assert client.post("/v1/keys", json={"name": "more"}, headers=admin).status_code == 201


def test_hsm_error_during_encryption_is_503(
    client: TestClient,
    hsm: Hsm,
    new_key: Callable[..., dict[str, Any]],
    billing: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A device error in the middle of an operation: 503, and the next request works."""
    new_key("cards", use_policy("billing"))
    real_key = Token.key

    def failing_key(token: Any, label: str) -> Any:
        raise p11.DeviceError()

    monkeypatch.setattr(Token, "key", failing_key)
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
    assert_error(response, 503, "hsm_unavailable")
    monkeypatch.setattr(Token, "key", real_key)
    assert client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing).status_code == 200


# -- database -------------------------------------------------------------------------


@pytest.fixture
def unreachable_db_client(tmp_path: Path, hsm: Hsm) -> Iterator[TestClient]:
    """An app whose database is a PostgreSQL nobody listens for."""
    settings = make_settings(tmp_path / "var", database_url=UNREACHABLE_DB)
    built = Services.build(settings, hsm=hsm, run_migrations=False)
    try:
        with TestClient(create_app(services=built), base_url="https://testserver") as test_client:
            yield test_client
    finally:
        built.close()


def test_unreachable_database_is_503(unreachable_db_client: TestClient, admin_token: str) -> None:
    client = unreachable_db_client
    headers = auth(admin_token)
    responses = [
        client.get("/v1/keys", headers=headers),
        client.post("/v1/keys", json={"name": "cards"}, headers=headers),
        client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=headers),
        client.post("/v1/decrypt", json={"ciphertext": "km:1:"}, headers=headers),
        client.post("/v1/principals", json={"name": "billing", "role": "app"}, headers=headers),
    ]
    for response in responses:
        body = assert_error(response, 503, "database_unavailable")
        assert "postgres" not in body["error"]["message"] and "127.0.0.1" not in body["error"]["message"]
    response = client.get("/v1/ready")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "hsm": "ok", "database": "unavailable"}
    assert client.get("/v1/health").status_code == 200


def test_database_lost_and_back(
    client: TestClient,
    services: Services,
    new_key: Callable[..., dict[str, Any]],
    billing: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    new_key("cards", use_policy("billing"))
    unreachable = Store(make_engine(UNREACHABLE_DB))
    monkeypatch.setattr(services.store, "_sessions", unreachable._sessions)  # writes (ORM sessions)
    monkeypatch.setattr(services.store, "_engine", unreachable._engine)  # reads and ping (Core connections)
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
    assert_error(response, 503, "database_unavailable")
    assert client.get("/v1/ready").json()["database"] == "unavailable"
    monkeypatch.undo()
    unreachable.close()
    response = client.post("/v1/keys/cards/encrypt", json={"plaintext": b64(CARD)}, headers=billing)
    assert response.status_code == 200, response.text


# -- atomic key creation --------------------------------------------------------------


def _admin_key_names(client: TestClient, admin: dict[str, str]) -> list[str]:
    response = client.get("/v1/keys", headers=admin)
    assert response.status_code == 200, response.text
    return [k["name"] for k in response.json()]


@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM", "HMAC_SHA256"])
@pytest.mark.parametrize(
    ("error", "status", "code"),
    [(DatabaseUnavailable(), 503, "database_unavailable"), (Conflict("a key named 'cards' exists"), 409, "conflict")],
)
def test_store_failure_leaves_no_hsm_objects(
    lenient_client: TestClient,
    services: Services,
    hsm: Hsm,
    admin: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    algorithm: str,
    error: Exception,
    status: int,
    code: str,
) -> None:
    generated: list[Any] = []
    real_generate = hsm.generate_version

    def spy(*args: Any) -> Any:
        generated.append(real_generate(*args))
        return generated[-1]

    def failing_create_key(*args: Any, **kwargs: Any) -> None:
        raise error

    monkeypatch.setattr(hsm, "generate_version", spy)
    monkeypatch.setattr(services.store, "create_key", failing_create_key)
    before = hsm.find_labels("km/")
    response = lenient_client.post("/v1/keys", json={"name": "cards", "algorithm": algorithm}, headers=admin)
    assert_error(response, status, code)
    assert len(generated) == 1  # the HSM objects were made, then removed again
    assert hsm.find_labels("km/") == before
    monkeypatch.undo()
    assert "cards" not in _admin_key_names(lenient_client, admin)
    assert_error(lenient_client.get("/v1/keys/cards", headers=admin), 404, "key_not_found")
    assert lenient_client.post("/v1/keys", json={"name": "cards"}, headers=admin).status_code == 201


def test_unexpected_store_failure_leaves_no_hsm_objects(
    lenient_client: TestClient, services: Services, hsm: Hsm, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_create_key(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(services.store, "create_key", failing_create_key)
    before = hsm.find_labels("km/")
    response = lenient_client.post("/v1/keys", json={"name": "cards"}, headers=admin)
    assert_error(response, 500, "internal_error")
    assert "disk on fire" not in response.text
    assert hsm.find_labels("km/") == before


class _FailingSecondGenerate:
    """A session that makes the first key and fails generating the second."""

    def __init__(self, session: Any, error: Exception) -> None:
        self._session = session
        self._error = error
        self.calls = 0

    def generate_key(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls >= 2:
            raise self._error
        return self._session.generate_key(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@pytest.mark.parametrize("error", [p11.DeviceError(), p11.GeneralError(), p11.DeviceMemory()])
def test_hsm_failure_while_generating_leaves_nothing(
    lenient_client: TestClient,
    hsm: Hsm,
    admin: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:
    before = hsm.find_labels("km/")
    failing = _FailingSecondGenerate(hsm.call(lambda token: token.session()), error)
    monkeypatch.setattr(hsm._token, "session", lambda: failing)
    response = lenient_client.post("/v1/keys", json={"name": "cards"}, headers=admin)
    assert_error(response, 503, "hsm_unavailable")
    assert failing.calls == 2
    monkeypatch.undo()
    assert hsm.find_labels("km/") == before
    assert "cards" not in _admin_key_names(lenient_client, admin)
    assert lenient_client.post("/v1/keys", json={"name": "cards"}, headers=admin).status_code == 201


def test_hsm_refusing_the_template_is_a_refusal_not_an_outage(
    lenient_client: TestClient, hsm: Hsm, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template the token refuses is answered by name (issue 28: a refusal is not an outage):
    400 naming the return code, nothing left behind, the service still ready."""
    before = hsm.find_labels("km/")
    refused = {**operations.HMAC_TEMPLATE, Attribute.CLASS: ObjectClass.PUBLIC_KEY}
    monkeypatch.setattr(operations, "HMAC_TEMPLATE", refused)
    response = lenient_client.post("/v1/keys", json={"name": "cards"}, headers=admin)
    body = assert_error(response, 400, "invalid_request")
    assert "CKR_" in body["error"]["message"]
    assert hsm.find_labels("km/") == before
    assert "cards" not in _admin_key_names(lenient_client, admin)
    assert lenient_client.get("/v1/ready").status_code == 200
