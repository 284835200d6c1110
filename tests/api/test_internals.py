"""The uvicorn and FastAPI internals keymanager relies on are still there, as it uses them.

``keymanager.serving.protocol.ClientCertProtocol`` subclasses uvicorn's ``HttpToolsProtocol`` and reads
its per-connection state; ``keymanager.api.fastpath`` reads FastAPI's ``route.body_field``. Neither
is public API, so pyproject.toml bounds both packages from above. When one of these tests fails
after an upgrade, the message names what changed: adapt the code, then move the bound.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import fastapi
import pytest
import uvicorn
from fastapi.routing import APIRoute
from packaging.requirements import Requirement
from pydantic import BaseModel
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from keymanager import serving
from keymanager.api.app import HOT_ENDPOINTS, ROUTERS
from keymanager.api.fastpath import fast_routes
from keymanager.serving.listeners import Listeners
from keymanager.serving.protocol import ClientCertProtocol

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def uvicorn_says(what: str) -> str:
    return f"uvicorn {uvicorn.__version__}: {what}; keymanager.serving relies on it (see pyproject.toml's bound)"


def fastapi_says(what: str) -> str:
    return f"FastAPI {fastapi.__version__}: {what}; keymanager.api.fastpath relies on it (see pyproject.toml's bound)"


class Transport(asyncio.Transport):
    """Just enough of a TLS transport for one request: records what is written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8443)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def answer(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize("package", ["fastapi", "uvicorn"])
def test_the_installed_version_is_within_the_bounds_these_tests_guard(package: str) -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    requirement = next(Requirement(d) for d in declared if Requirement(d).name == package)
    upper = [spec for spec in requirement.specifier if spec.operator in ("<", "<=", "~=", "==")]
    assert upper, f"pyproject.toml must bound {package} from above: keymanager uses its internals"
    assert requirement.specifier.contains(version(package)), f"{package} {version(package)} is not {requirement}"


def test_every_protocol_method_overridden_exists_in_uvicorn_with_the_same_parameters() -> None:
    ours = {name: member for name, member in vars(ClientCertProtocol).items() if inspect.isfunction(member)}
    overrides = {name: member for name, member in ours.items() if not name.startswith("_")}
    assert {"connection_made", "shutdown", "on_message_begin"} <= set(overrides)
    for name, member in overrides.items():
        theirs = getattr(HttpToolsProtocol, name, None)
        assert theirs is not None, uvicorn_says(f"HttpToolsProtocol.{name} is gone (ClientCertProtocol overrides it)")
        expected = list(inspect.signature(member).parameters)
        found = list(inspect.signature(theirs).parameters)
        assert found == expected, uvicorn_says(f"HttpToolsProtocol.{name}{inspect.signature(theirs)} changed")


def test_the_subclass_private_names_shadow_nothing_of_uvicorn() -> None:
    private = [name for name in vars(ClientCertProtocol) if name.startswith("_") and not name.startswith("__")]
    loop = asyncio.new_event_loop()
    try:
        instance = HttpToolsProtocol(uvicorn.Config(answer, log_config=None), ServerState(), {}, _loop=loop)
    finally:
        loop.close()
    for name in private:
        assert not hasattr(instance, name), uvicorn_says(f"HttpToolsProtocol now has {name} too")


def test_uvicorn_takes_every_setting_serve_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    passed: dict[str, Any] = {}

    class Capturing(serving._WorkerConfig):  # the configuration serve makes, its settings kept
        def __init__(self, app: Any, **settings: Any) -> None:
            passed.update(settings, app=app)
            super().__init__(app, **settings)

    class Stopped:  # uvicorn's server, which serve then runs: not run here
        def __init__(self, config: uvicorn.Config) -> None:
            self.started = True

        def run(self, sockets: list[socket.socket]) -> None:
            passed["sockets"] = sockets

    monkeypatch.setattr(serving, "_WorkerConfig", Capturing)
    monkeypatch.setattr(serving.uvicorn, "Server", Stopped)
    options = serving.ServeOptions(
        host="127.0.0.1",
        port=8443,
        workers=1,
        tls_cert=tmp_path / "cert.pem",
        tls_key=tmp_path / "key.pem",
        client_ca=tmp_path / "ca.pem",
    )
    with socket.socket() as https:
        serving.serve(options, Listeners(https=https, kmip=None))
        assert passed.pop("sockets") == [https]
    accepted = inspect.signature(uvicorn.Config).parameters
    for name in passed.keys() - {"app"}:
        assert name in accepted, uvicorn_says(f"Config no longer takes {name}")
    assert {"http", "ssl_context_factory"} <= passed.keys()
    assert list(inspect.signature(serving.tls12_context).parameters) == ["config", "default"]


async def one_request() -> None:
    config = uvicorn.Config(answer, log_config=None)
    protocol = HttpToolsProtocol(config, ServerState(), {}, _loop=asyncio.get_running_loop())
    transport = Transport()
    protocol.connection_made(transport)
    assert protocol.transport is transport, uvicorn_says("the protocol keeps its transport as .transport")
    assert protocol.loop is asyncio.get_running_loop(), uvicorn_says("the protocol keeps its event loop as .loop")
    assert protocol.cycle is None, uvicorn_says(".cycle is None before the first request")

    protocol.data_received(b"GET /v1/health HTTP/1.1\r\nHost: km\r\n\r\n")
    assert protocol.scope["type"] == "http", uvicorn_says(".scope is the request's ASGI scope")
    cycle = protocol.cycle
    assert getattr(cycle, "response_complete", None) is False, uvicorn_says(
        "the request being answered is .cycle, with .response_complete False"
    )
    deadline = asyncio.get_running_loop().time() + 5
    while not cycle.response_complete:
        assert asyncio.get_running_loop().time() < deadline, uvicorn_says("the response never completed")
        await asyncio.sleep(0)  # let the app's task run
    assert transport.written.startswith(b"HTTP/1.1 204"), transport.written
    protocol.connection_lost(None)


def test_the_protocol_state_clientcertprotocol_reads_is_where_it_was() -> None:
    asyncio.run(one_request())


class Body(BaseModel):
    value: int


def test_fastapi_routes_expose_their_body_model_as_fastpath_reads_it() -> None:
    router = fastapi.APIRouter()

    @router.post("/things/{name}")
    async def create(name: str, body: Body) -> dict[str, str]:
        return {}

    route = router.routes[0]
    assert isinstance(route, APIRoute)
    assert hasattr(route, "body_field"), fastapi_says("APIRoute.body_field is gone")
    field_info = getattr(route.body_field, "field_info", None)
    assert field_info is not None, fastapi_says("route.body_field.field_info is gone")
    assert field_info.annotation is Body, fastapi_says(f"body_field.field_info.annotation is {field_info.annotation!r}")
    assert route.endpoint is create and route.path == "/things/{name}"


def test_fastpath_finds_every_hot_route_and_its_model() -> None:
    found = fast_routes(ROUTERS, HOT_ENDPOINTS)
    assert sorted(f.endpoint.__name__ for f in found) == sorted(e.__name__ for e in HOT_ENDPOINTS), fastapi_says(
        "fast_routes no longer finds every hot route through route.body_field"
    )
    for fast in found:
        assert issubclass(fast.model, BaseModel), fastapi_says(f"{fast.route.path}'s body model is {fast.model!r}")
