"""The HTTP ceilings' servers: what answering the 1 KB encrypt request costs before any key work.

* :func:`raw_app` — a bare ASGI application: reads the body and answers it back as JSON;
* :func:`fastapi_app` — the same route declared in FastAPI, with a pydantic body and response
  model like the service's encrypt route, answering a ciphertext-sized field.

Both are served by the same uvicorn (httptools, uvloop), the same TLS certificate and the same
worker count as the service, and driven by the same wrk script: what the service spends beyond
them is its own.
"""

from __future__ import annotations

import base64
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

_HEADERS = [(b"content-type", b"application/json")]


async def raw_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echo the request body (the 1 KB encrypt JSON) with status 200."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": body})


class EncryptBody(BaseModel):
    plaintext: str
    context: dict[str, str] | None = None


class Encrypted(BaseModel):
    ciphertext: str
    key_id: str
    key_version: int


def fastapi_app() -> FastAPI:
    """The encrypt route's shape in FastAPI, answering the plaintext back as the 'ciphertext'."""
    app = FastAPI()

    @app.post("/v1/keys/{key}/encrypt", response_model=Encrypted)
    async def encrypt(key: str, body: EncryptBody) -> Encrypted:
        base64.b64decode(body.plaintext, validate=True)
        return Encrypted(ciphertext=f"km:1:{'0' * 32}:1:{body.plaintext}", key_id="0" * 32, key_version=1)

    return app
