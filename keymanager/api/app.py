"""The FastAPI application, built by :func:`create_app` (no import-time singletons)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import os
import random
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI

from keymanager import __version__
from keymanager.api import errors, metrics
from keymanager.api.audit_trail import AuditTrail
from keymanager.api.fastpath import FastPath, FastRoute, fast_routes
from keymanager.api.front_door import BodyLimits, FrontDoor
from keymanager.api.gateway import Gateway, HttpDoor
from keymanager.api.routes import (
    access_keys,
    approle,
    approvals,
    asymmetric,
    audit,
    crypto,
    health,
    inventory,
    key_import,
    key_specs,
    keys,
    objects,
    principals,
    streams,
    tokens,
)
from keymanager.config import Settings
from keymanager.domain.models import KeyState
from keymanager.doors.console.door import ConsoleDoor, console_files
from keymanager.doors.kmip.door import KmipDoor
from keymanager.doors.kms.door import KmsDoor
from keymanager.doors.transit.door import BodyLimits as TransitLimits
from keymanager.doors.transit.door import TransitDoor
from keymanager.doors.xks.door import XksDoor
from keymanager.services.container import Services
from keymanager.services.spool import remove_dead
from keymanager.services.throttle import AuthThrottle

log = logging.getLogger(__name__)

_Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
"""What FastAPI runs around the life of its app (start-up before ``yield``, shutdown after)."""


_MODULES = (
    health,
    principals,
    access_keys,
    approle,
    key_specs,
    keys,
    crypto,
    asymmetric,
    streams,
    audit,
    tokens,
    key_import,
    inventory,
    approvals,
    objects,
)
ROUTERS: tuple[APIRouter, ...] = (
    principals.me_router,
    *(m.router for m in _MODULES),
    approvals.key_rules_router,
    health.metrics_router,
)
"""The routers of the app, in the order FastAPI matches them."""
HOT_ENDPOINTS: tuple[Callable[..., Any], ...] = (
    crypto.encrypt,
    crypto.decrypt_with_key,
    crypto.decrypt,
    crypto.encrypt_batch,
    crypto.decrypt_batch,
    crypto.generate_data_key,
    crypto.mac,
    crypto.verify_mac,
    asymmetric.sign,
    asymmetric.verify,
)
"""The endpoints the gateway serves without FastAPI when ``KM_FAST_PATH`` is on (the bulk of the traffic)."""


def hot_routes() -> list[FastRoute]:
    """The fast routes of :data:`HOT_ENDPOINTS`, wherever in :data:`ROUTERS` they are (tests/api/test_fastpath.py
    lists them by method and path)."""
    return fast_routes(ROUTERS, HOT_ENDPOINTS)


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> Gateway:
    """An application for ``settings``: the FastAPI app of the routes behind the one ASGI layer in
    front of it (``api/gateway.py``); with ``services`` given, it uses (and does not close) those."""
    settings = settings or (services.settings if services else Settings())
    app_metrics = metrics.Metrics()
    throttle = _auth_throttle(settings, app_metrics)
    app = _fastapi_app(_lifespan(settings, services, app_metrics, throttle), app_metrics, services)
    return Gateway(
        app,
        door=FrontDoor(
            services=lambda: app.state.services,
            throttle=throttle,
            limits=BodyLimits(json=settings.max_request_bytes, batch=settings.max_batch_request_bytes),
            methods=lambda scope: errors.methods_served(app.router.routes, scope),
        ),
        trail=AuditTrail(
            log=lambda: app.state.services.audit_log,
            key_id=lambda ref: app.state.services.cache.key_id(ref) or app.state.services.keys.id_of(ref),
        ),
        metrics=app_metrics,
        doors=http_doors(app, settings, throttle),
        fast=FastPath(hot_routes()) if settings.fast_path else None,
        access_log=settings.access_log,
    )


def _auth_throttle(settings: Settings, app_metrics: metrics.Metrics) -> AuthThrottle:
    """The limit on failed authentications per client address, as ``settings`` set it; each failure
    and each refusal counted in ``app_metrics``."""
    return AuthThrottle(
        rate=settings.auth_failures_per_second,
        burst=settings.auth_failure_burst,
        max_addresses=settings.auth_failure_addresses,
        summary_seconds=settings.auth_failure_summary_seconds,
        on_failure=app_metrics.observe_auth_failure,
        on_refusal=app_metrics.observe_auth_throttled,
    )


def _fastapi_app(lifespan: _Lifespan, app_metrics: metrics.Metrics, services: Services | None) -> FastAPI:
    """The FastAPI app of :data:`ROUTERS` with our error answers (``errors.install``) and ``lifespan``;
    its state holds ``app_metrics`` and, when given, ``services`` (the lifespan sets them otherwise)."""
    app = FastAPI(
        title="keymanager",
        version=__version__,
        description="Keys generated and used inside a PKCS#11 HSM; encryption of small fields over HTTPS.",
        lifespan=lifespan,
    )
    app.state.metrics = app_metrics
    if services is not None:
        app.state.services = services
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router)
    return app


def http_doors(app: FastAPI, settings: Settings, throttle: AuthThrottle) -> list[HttpDoor]:
    """The doors beside the REST API, in the order the gateway asks them, each using ``app``'s
    services and ``throttle``: AWS KMS, XKS, Vault Transit and the console (with ``KM_UI``)."""
    doors: list[HttpDoor] = [
        KmsDoor(services=lambda: app.state.services, throttle=throttle),  # AWS KMS API on POST /
        XksDoor(services=lambda: app.state.services, throttle=throttle),  # …/kms/xks/v1/…
        TransitDoor(  # /v1/<mount>/… and /v1/auth/…
            services=lambda: app.state.services,
            throttle=throttle,
            mounts=settings.transit_mount,
            limits=TransitLimits(json=settings.max_request_bytes, batch=settings.max_batch_request_bytes),
        ),
    ]
    if settings.ui_enabled():
        doors.append(ConsoleDoor(console_files(settings)))  # /ui/
    return doors


def kmip_door(gateway: Gateway) -> KmipDoor:
    """The KMIP door onto ``gateway``'s services, sharing its throttle and metrics: a door beside
    the HTTP ones, whose listener (``serving/kmip.py``) hands it its messages (TTLV on 5696)."""
    return KmipDoor(services=lambda: gateway.state.services, throttle=gateway.door.throttle, metrics=gateway.metrics)


def _lifespan(
    settings: Settings, services: Services | None, app_metrics: metrics.Metrics, throttle: AuthThrottle
) -> _Lifespan:
    """The app's start-up and shutdown. Start-up: the services (``services``, or built for ``settings``)
    reporting to ``app_metrics``; the spool files of processes that are gone removed; the background
    tasks started; what start-up made frozen out of the garbage collector's sight. Shutdown: the tasks
    cancelled, the last summaries of ``throttle``'s failed authentications written and, when the
    services were built here, a last audit checkpoint and the services closed."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = services is None
        app.state.services = services or Services.build(settings)
        app.state.services.observe(app_metrics)
        await asyncio.to_thread(remove_dead, settings.spool_dir)  # spool files of processes that are gone
        tasks = _start_tasks(app.state.services, settings, throttle, app_metrics, watch_hsm=owned)
        app_metrics.start_worker()
        app.state.before_scrape = _before_scrape(app.state.services, app_metrics)
        # What start-up made lives as long as the process: out of the collector's sight, a full
        # collection no longer walks it (a few hundred thousand objects) while requests wait.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await app.state.services.audit_log.summaries(throttle.due(everything=True))
            if owned:
                _close_with_checkpoint(app.state.services)

    return lifespan


def _start_tasks(
    services: Services, settings: Settings, throttle: AuthThrottle, app_metrics: metrics.Metrics, *, watch_hsm: bool
) -> list[asyncio.Task[None]]:
    """The background tasks of a worker, started: maintenance, summaries of failed authentications,
    audit checkpoints, metrics samples and, with ``watch_hsm`` and ``KM_HSM_STUCK_EXIT_SECONDS``, the
    watch that ends the process when an HSM call is stuck."""
    tasks = [
        asyncio.create_task(_maintain(services, settings.maintenance_interval_seconds)),
        asyncio.create_task(_summarise(services, throttle)),
        asyncio.create_task(_checkpoints(services, settings.audit_checkpoint_interval_seconds)),
        asyncio.create_task(_sample(services, app_metrics)),
    ]
    if watch_hsm and settings.hsm_stuck_exit_seconds > 0:
        tasks.append(asyncio.create_task(_watch_hsm(services, settings.hsm_stuck_exit_seconds)))
    return tasks


async def _maintain(services: Services, interval: float) -> None:
    """Every ``interval`` seconds (with jitter), rotate due keys, sweep keys due for destruction,
    orphaned HSM objects and spool areas of dead processes (:meth:`Services.maintain`).

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


async def _sample(services: Services, app_metrics: metrics.Metrics) -> None:
    """Every ``metrics.FLUSH_SECONDS``, write the requests and HSM calls this worker counted; every
    ``metrics.SAMPLE_SECONDS``, record its database pool and GC counts too."""
    every = max(1, round(metrics.SAMPLE_SECONDS / metrics.FLUSH_SECONDS))
    for turn in itertools.count():
        if turn % every == 0:
            app_metrics.sample_worker(services.inventory.connections_in_use())
        else:
            app_metrics.flush()
        await asyncio.sleep(metrics.FLUSH_SECONDS)


def _before_scrape(services: Services, app_metrics: metrics.Metrics) -> Callable[[], None]:
    """What the worker answering ``/metrics`` brings up to date first: its own samples, the key counts."""
    states = [state.value for state in KeyState]
    counts = metrics.KeyCounts(app_metrics.keys, services.inventory.keys_by_state, states)

    def refresh() -> None:
        app_metrics.sample_worker(services.inventory.connections_in_use())
        counts.refresh()

    return refresh


async def _summarise(services: Services, throttle: AuthThrottle) -> None:
    """Every interval, write the summaries of failed authentications whose interval is over."""
    while True:
        await asyncio.sleep(throttle.summary_seconds)
        await services.audit_log.summaries(throttle.due())


STUCK_EXIT_STATUS = 70
"""Exit status of a worker whose HSM call never returned (EX_SOFTWARE)."""


async def _watch_hsm(services: Services, limit: float) -> None:
    """End this process when an HSM call has been running ``limit`` seconds past its deadline.

    The thread stuck in the PKCS#11 library can neither be interrupted nor safely replaced by
    another thread of this process (see ``keymanager.hsm.dispatch``); until it returns, every HSM
    call is refused and ``/v1/ready`` answers 503. A fresh process is the only safe way out, so
    the worker exits and its supervisor (uvicorn's for ``--workers N``; systemd, Kubernetes or
    Docker otherwise) starts a new one. Requests in flight are cut, as by any crash: none was
    acknowledged, so nothing acknowledged is lost.
    """
    while True:
        await asyncio.sleep(min(1.0, limit / 2))
        stuck = services.readiness.hsm_stuck_for()
        if stuck > limit:
            log.critical("HSM call stuck %.0f s past its deadline: this worker exits for a fresh one", stuck)
            os._exit(STUCK_EXIT_STATUS)


async def _checkpoints(services: Services, interval: float) -> None:
    """Every ``interval`` seconds, a checkpoint of the audit chain to the log (when it moved)."""
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(services.audit_chain.emit_checkpoint)
        except Exception as exc:  # keep the loop alive; the next round retries
            log.warning("audit checkpoint failed: %s", type(exc).__name__)


def _close_with_checkpoint(services: Services) -> None:
    """Flush the audit log, write a last checkpoint, then close everything."""
    services.audit_writer.close()
    try:
        services.audit_chain.emit_checkpoint(always=True)
    except Exception as exc:  # closing goes on
        log.warning("audit checkpoint at shutdown failed: %s", type(exc).__name__)
    services.close()
