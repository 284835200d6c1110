"""A guard on a hot route cannot be skipped (issue 20, item 9).

The trap: the fast path (``api/fastpath.py``) checked a hot route's signature but not its
``dependencies=[...]``, so a role guard added to ``POST /v1/keys/{key}/encrypt`` was skipped
silently: before, the guarded encrypt answered 200 through the fast path (and 403 through
FastAPI); now a hot route with a dependency is left to FastAPI, which runs it: 403 on both paths.
The app is the real one (``create_app``) with the real encrypt route, or the real sign route
(hot since issue 22), given a guard here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter, Depends
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from keymanager.api.app import create_app, hot_routes
from keymanager.api.fastpath import SERVED, fast_routes
from keymanager.api.routes import asymmetric, crypto
from keymanager.domain.models import Role
from keymanager.errors import Forbidden
from keymanager.services.container import Services
from tests.api.support import b64
from tests.conftest import auth

ENCRYPT, SIGN = "/v1/keys/{key}/encrypt", "/v1/keys/{key}/sign"
ROUTERS = {ENCRYPT: crypto.router, SIGN: asymmetric.router}
"""The guarded hot routes and their routers."""
REQUESTS = {
    ENCRYPT: ("/v1/keys/cards/encrypt", {"plaintext": b64(b"4111")}),
    SIGN: ("/v1/keys/signer/sign", {"message": b64(b"4111"), "algorithm": "ECDSA_SHA_256"}),
}


async def refuse_everyone() -> None:
    """The guard: nobody passes."""
    raise Forbidden("guarded route")


def guarded(original: APIRoute, *, on_route: list[Any] | None = None, on_router: list[Any] | None = None) -> APIRoute:
    """``original`` again, with ``dependencies=`` on the route and on its router."""
    router = APIRouter(dependencies=on_router or [])
    router.add_api_route(
        original.path,
        original.endpoint,
        methods=["POST"],
        response_model=original.response_model,
        dependencies=on_route or [],
    )
    made = router.routes[0]
    assert isinstance(made, APIRoute)
    return made


def route_of(path: str) -> APIRoute:
    return next(r for r in ROUTERS[path].routes if isinstance(r, APIRoute) and r.path == path)


@pytest.fixture(params=[ENCRYPT, SIGN])
def guarded_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The real encrypt (or sign) route with ``dependencies=[Depends(refuse_everyone)]``, in the real router."""
    path: str = request.param
    original = route_of(path)
    replaced = guarded(original, on_route=[Depends(refuse_everyone)])
    routes = [replaced if r is original else r for r in ROUTERS[path].routes]
    monkeypatch.setattr(ROUTERS[path], "routes", routes)
    return path


@pytest.fixture
def billing(services: Services) -> str:
    token = services.principals.create("billing", Role.APP).token
    admin = services.principals.create("admin", Role.ADMIN).token
    with TestClient(create_app(services=services), base_url="https://testserver") as client:
        for key in (
            {"name": "cards", "policy": {"encrypt": ["billing"]}},
            {"name": "signer", "algorithm": "ECC_NIST_P256", "policy": {"sign": ["billing"]}},
        ):
            made = client.post("/v1/keys", json=key, headers=auth(admin))
            assert made.status_code == 201, made.text
    return token


def call(services: Services, token: str, template: str, *, fast_path: bool) -> tuple[int, bool | None]:
    """Status of an encrypt with ``cards`` (or a sign with ``signer``: ``template``) through an app with or
    without the fast path, and whether it was fast."""
    settings = services.settings.model_copy(update={"fast_path": fast_path})
    seen: list[dict[str, Any]] = []
    app = create_app(settings, services=services)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope)
        await app(scope, receive, send)

    with TestClient(recording, base_url="https://testserver") as client:
        path, body = REQUESTS[template]
        answer = client.post(path, json=body, headers=auth(token))
    return answer.status_code, seen[-1].get("state", {}).get(SERVED)


@pytest.mark.parametrize("template", [ENCRYPT, SIGN])
def test_without_a_guard_encrypt_and_sign_are_fast(services: Services, billing: str, template: str) -> None:
    assert call(services, billing, template, fast_path=True) == (200, True)
    assert call(services, billing, template, fast_path=False) == (200, None)


def test_a_guard_on_a_hot_route_is_enforced_on_both_paths(services: Services, billing: str, guarded_path: str) -> None:
    assert guarded_path not in {fast.route.path for fast in hot_routes()}
    for fast_path in (True, False):
        status, served_fast = call(services, billing, guarded_path, fast_path=fast_path)
        assert status == 403 and not served_fast, fast_path


def test_a_guard_of_the_router_or_inside_a_dependency_keeps_a_route_off_the_fast_path() -> None:
    async def inner_guard(_: None = Depends(refuse_everyone)) -> None:
        return None

    original = route_of(ENCRYPT)
    assert [fast.route.path for fast in fast_routes([_router_of(original)], [original.endpoint])] == [original.path]
    for route in (
        guarded(original, on_router=[Depends(refuse_everyone)]),
        guarded(original, on_route=[Depends(inner_guard)]),
    ):
        assert fast_routes([_router_of(route)], [route.endpoint]) == []


def _router_of(route: APIRoute) -> APIRouter:
    router = APIRouter()
    router.routes.append(route)
    return router


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    yield
    assert all(route_of(path).dependencies == [] for path in ROUTERS)  # monkeypatch gave the real routers back
