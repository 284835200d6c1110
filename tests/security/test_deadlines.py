"""An HSM that stops answering costs each request at most the deadline, and the service heals by itself;
readiness says so. Real server over TLS, real SoftHSM: the hang is SoftHSM waiting for a token lock
that another process holds (tests/support/token_lock.py), the outage a token directory moved away.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.security.conftest import Server, running_server
from tests.support.token_lock import token_locked

pytestmark = pytest.mark.softhsm

DEADLINE = 1.0
POLICY: dict[str, list[str]] = {
    "encrypt": ["app"],
    "decrypt": ["app"],
    "generate_data_key": [],
    "reencrypt": [],
    "mac": [],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One worker, so that every request meets the same HSM thread."""
    home = tmp_path_factory.mktemp("deadlines")
    with running_server(home, workers=1, KM_HSM_TIMEOUT_SECONDS=str(DEADLINE)) as started:
        yield started


@pytest.fixture(scope="module")
def admin(server: Server) -> Iterator[httpx.Client]:
    with server.client(server.admin_token) as client:
        assert client.post("/v1/principals", json={"name": "app", "role": "app"}).status_code == 201
        yield client


def _tokens(server: Server) -> Path:
    return server.var_dir / "softhsm" / "tokens"


def _timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    response = call()
    return response, time.monotonic() - start


def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Whether ``check`` holds within ``timeout`` s (polled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def _ready(client: httpx.Client) -> tuple[int, Any]:
    response = client.get("/v1/ready")
    return response.status_code, response.json()


def _new_key(client: httpx.Client, name: str) -> httpx.Response:
    return client.post("/v1/keys", json={"name": name, "policy": POLICY})


def _error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


def test_a_hung_hsm_call_answers_503_within_the_deadline_and_the_service_recovers(
    server: Server, admin: httpx.Client
) -> None:
    assert _new_key(admin, "before-hang").status_code == 201
    with token_locked(_tokens(server)):
        response, waited = _timed(lambda: _new_key(admin, "during-hang"))
        assert response.status_code == 503 and _error_code(response) == "hsm_unavailable"
        assert waited < DEADLINE + 1
        # The call is still stuck: further requests are refused at once, and readiness says why.
        response, waited = _timed(lambda: _new_key(admin, "while-stuck"))
        assert response.status_code == 503 and waited < DEADLINE + 1
        assert _ready(admin) == (503, {"status": "unavailable", "hsm": "unavailable", "database": "ok"})
    assert _eventually(lambda: _ready(admin)[0] == 200)
    assert _new_key(admin, "after-hang").status_code == 201
    names = {key["name"] for key in admin.get("/v1/keys").json()}
    assert {"before-hang", "after-hang"} <= names and "while-stuck" not in names
    assert 'km_hsm_timeouts_total{operation="generate_version"} 1.0' in admin.get("/metrics").text


def test_ready_is_503_while_the_token_directory_is_gone_and_200_once_it_is_back(
    server: Server, admin: httpx.Client
) -> None:
    assert _ready(admin)[0] == 200
    tokens, moved = _tokens(server), _tokens(server).with_name("tokens.moved")
    os.rename(tokens, moved)
    try:
        assert _ready(admin) == (503, {"status": "unavailable", "hsm": "unavailable", "database": "ok"})
        response = _new_key(admin, "no-token")
        assert response.status_code == 503 and _error_code(response) == "hsm_unavailable"
        # Readiness probes (a token write) and keeps saying 503 while the directory is gone.
        assert not _eventually(lambda: _ready(admin)[0] == 200, timeout=2.5)
    finally:
        os.rename(moved, tokens)
    assert _eventually(lambda: _ready(admin) == (200, {"status": "ok", "hsm": "ok", "database": "ok"}))
    assert _new_key(admin, "token-back").status_code == 201


@pytest.mark.own_server
def test_a_call_that_never_returns_ends_the_worker_and_a_fresh_one_serves(tmp_path: Path) -> None:
    """The stuck thread cannot be replaced inside the process: the worker exits and uvicorn starts another."""
    settings = {"KM_HSM_TIMEOUT_SECONDS": str(DEADLINE), "KM_HSM_STUCK_EXIT_SECONDS": "1"}
    with running_server(tmp_path, workers=2, **settings) as server, server.client(server.admin_token) as admin:
        before = set(server.worker_pids())
        assert admin.post("/v1/principals", json={"name": "app", "role": "app"}).status_code == 201  # POLICY names it
        with token_locked(_tokens(server)):
            response, waited = _timed(lambda: _new_key(admin, "stuck"))
            assert response.status_code == 503 and waited < DEADLINE + 1
            assert _eventually(lambda: len(set(server.worker_pids()) - before) >= 1, timeout=30)
        assert _eventually(lambda: _ready(admin)[0] == 200)
        assert _new_key(admin, "fresh").status_code == 201
        assert "exits for a fresh one" in server.log.read_text()
