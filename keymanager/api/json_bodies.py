"""Request bodies of the native API read as strict JSON (``domain/strict_json.py``): an object
that names a key twice, at any depth, a non-finite number or nesting deeper than
``strict_json.MAX_DEPTH`` (refused before decoding) is 400 ``invalid_request``.

FastAPI decodes a JSON body with ``Request.json()``; every router of ``api/routes/`` is made with
``route_class=StrictJsonRoute``, whose requests decode with :func:`decoded` instead
(``tests/security/test_strict_json.py`` walks the routers). The fast path (``api/fastpath.py``)
calls :func:`decoded` itself.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from keymanager.domain import strict_json
from keymanager.errors import InvalidRequest


def decoded(body: bytes) -> Any:
    """The JSON value of ``body``; InvalidRequest when it is JSON no door takes (an object naming a
    key twice, ``NaN``, nesting too deep), ValueError (``json.JSONDecodeError`` among them) when
    it is not JSON."""
    try:
        return strict_json.loads(body)
    except strict_json.Refused as exc:
        raise InvalidRequest(str(exc)) from None


class StrictJsonRequest(Request):
    """A request whose :meth:`json` is :func:`decoded`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = decoded(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose body is decoded by :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict
