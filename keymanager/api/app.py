"""The FastAPI application, built by :func:`create_app` (no import-time singletons)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from keymanager import __version__
from keymanager.api import errors
from keymanager.api.audit_trail import AuditTrail
from keymanager.api.middleware import RequestContext
from keymanager.api.routes import audit, crypto, health, keys, principals
from keymanager.config import Settings
from keymanager.services.container import Services


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    """An application for ``settings``; with ``services`` given, it uses (and does not close) those."""
    settings = settings or (services.settings if services else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = services is None
        app.state.services = services or Services.build(settings)
        try:
            yield
        finally:
            if owned:
                app.state.services.close()

    app = FastAPI(
        title="keymanager",
        version=__version__,
        description="Keys generated and used inside a PKCS#11 HSM; encryption of small fields over HTTPS.",
        lifespan=lifespan,
    )
    if services is not None:
        app.state.services = services
    errors.install(app)
    for module in (health, principals, keys, crypto, audit):
        app.include_router(module.router)
    app.add_middleware(AuditTrail, log=lambda: app.state.services.audit, error_app=errors.render)
    app.add_middleware(RequestContext, max_body=settings.max_request_bytes, error_app=errors.render)
    return app


def app_from_env() -> FastAPI:
    """Factory for uvicorn (``--factory``): settings from the environment, built in each worker."""
    return create_app(Settings())
