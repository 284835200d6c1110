"""The FastAPI application, built by :func:`create_app` (no import-time singletons)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from keymanager import __version__
from keymanager.api import errors, metrics
from keymanager.api.affinity import pin_worker
from keymanager.api.audit_trail import AuditTrail
from keymanager.api.fastpath import FastPath, fast_routes
from keymanager.api.kms import KmsDoor
from keymanager.api.middleware import RequestContext
from keymanager.api.routes import access_keys, audit, crypto, health, keys, mac, principals, streams
from keymanager.config import Settings
from keymanager.services.container import Services

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    """An application for ``settings``; with ``services`` given, it uses (and does not close) those."""
    settings = settings or (services.settings if services else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = services is None
        app.state.services = services or Services.build(settings)
        app.state.services.hsm.observer = metrics.observe_hsm
        app.state.services.audit.observer = metrics.observe_audit_queue
        maintenance = asyncio.create_task(_maintain(app.state.services, settings.maintenance_interval_seconds))
        try:
            yield
        finally:
            maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await maintenance
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
    for module in (health, principals, access_keys, keys, crypto, mac, streams, audit):
        app.include_router(module.router)
    app.include_router(health.metrics_router)
    hot: list[Callable[..., Any]] = [
        crypto.encrypt,
        crypto.decrypt_with_key,
        crypto.decrypt,
        crypto.encrypt_batch,
        crypto.decrypt_batch,
        crypto.generate_data_key,
        mac.mac,
        mac.verify_mac,
    ]
    fast = fast_routes(crypto.router, hot) + fast_routes(mac.router, hot)
    app.add_middleware(FastPath, routes=fast, error_app=errors.render)
    app.add_middleware(KmsDoor, services=lambda: app.state.services)  # the AWS KMS API on POST /
    app.add_middleware(metrics.RequestMetrics)
    app.add_middleware(
        AuditTrail,
        log=lambda: app.state.services.audit,
        key_id=lambda ref: app.state.services.keys.id_of(ref),
        error_app=errors.render,
    )
    app.add_middleware(
        RequestContext,
        max_body=settings.max_request_bytes,
        max_batch_body=settings.max_batch_request_bytes,
        error_app=errors.render,
    )
    return app


async def _maintain(services: Services, interval: float) -> None:
    """Every ``interval`` seconds (with jitter), rotate due keys and sweep keys due for destruction.

    Every process does this; the database makes sure each change happens once. Each finished
    round is a DEBUG line naming the process.
    """
    while True:
        await asyncio.sleep(interval * random.uniform(0.8, 1.2))  # noqa: S311 (jitter, not cryptography)
        try:
            await asyncio.to_thread(services.maintain)
        except Exception as exc:  # keep the loop alive; the next round retries
            log.warning("scheduled maintenance failed: %s", type(exc).__name__)
        else:
            log.debug("maintenance round done in process %d", os.getpid())


def app_from_env() -> FastAPI:
    """Factory for uvicorn (``--factory``): settings from the environment, built in each worker."""
    settings = Settings()
    _log_to_stderr(settings.log_level)
    if settings.cpu_affinity:
        cpu = pin_worker(settings.run_dir)
        log.info("worker pinned to CPU %s", cpu)
    return create_app(settings)


def _log_to_stderr(level: str) -> None:
    """Send the service's own log records (never secrets) to stderr, beside uvicorn's."""
    logger = logging.getLogger("keymanager")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level.upper())
