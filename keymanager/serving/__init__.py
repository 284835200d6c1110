"""Serving the API: uvicorn over HTTPS (TLS 1.2 minimum), its worker processes and their CPUs.

* :func:`serve` runs uvicorn with the service's protocol and event loop
  (:mod:`keymanager.serving.protocol`: client certificates, bounds on request heads and TLS
  handshakes; :mod:`keymanager.serving.front`: the PROXY header of a trusted balancer before TLS)
  and :func:`keymanager.serving.app.worker_app` as the app factory of every worker;
* :func:`plan_workers` decides how many workers run and whether each is pinned to a CPU of its
  own (:mod:`keymanager.serving.affinity`);
* :func:`~keymanager.serving.metrics_dir.replica_metrics_dir` gives the replica's workers one
  Prometheus multiprocess directory;
* :func:`~keymanager.serving.listeners.bind_listeners` binds the HTTPS and KMIP ports once, before
  any worker starts (a port another process holds stops the start, named), and :func:`serve`
  hands both sockets to every worker.

The HTTP API itself (:func:`keymanager.api.app.create_app`) knows nothing of this.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from keymanager.config import Settings
from keymanager.serving.affinity import CpuBudget
from keymanager.serving.listeners import Listeners, ListenRefused, bind_listeners, hand_over_kmip
from keymanager.serving.metrics_dir import replica_metrics_dir

__all__ = [
    "ListenRefused",
    "Listeners",
    "ServeOptions",
    "WorkerPlan",
    "bind_listeners",
    "plan_workers",
    "replica_metrics_dir",
    "serve",
]

APP_FACTORY = "keymanager.serving.app:worker_app"
"""Imported by uvicorn once ``PROMETHEUS_MULTIPROC_DIR`` is set: prometheus_client chooses its
multiprocess mode when first imported, so nothing here imports the app or its metrics."""
GRACEFUL_SHUTDOWN_SECONDS = 10
"""On SIGTERM, requests in flight get this long; idle keep-alive connections do not hold the exit."""


@dataclass(frozen=True)
class WorkerPlan:
    """How many worker processes run, whether each is pinned to a CPU of its own, and why."""

    workers: int
    pinned: bool
    reason: str


def plan_workers(settings: Settings, workers: int | None, budget: CpuBudget) -> WorkerPlan:
    """``workers`` (``--workers``), else ``KM_WORKERS``, else one per CPU of ``budget``; pinned as
    ``KM_CPU_AFFINITY`` says, else when ``budget`` finds it safe (:meth:`CpuBudget.pinning`)."""
    count = workers or settings.workers or budget.workers()
    if settings.cpu_affinity is not None:
        return WorkerPlan(count, settings.cpu_affinity, f"KM_CPU_AFFINITY={str(settings.cpu_affinity).lower()}")
    pinned, reason = budget.pinning(count)
    return WorkerPlan(count, pinned, reason)


def tls12_context(config: uvicorn.Config, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """uvicorn's context with TLS 1.2 as the minimum version."""
    context = default()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int
    workers: int
    tls_cert: Path | None
    tls_key: Path | None
    client_ca: Path | None
    log_level: str = "warning"
    keepalive_timeout: int = 5


class _WorkerConfig(uvicorn.Config):
    """uvicorn's configuration, which also carries the KMIP socket to each worker: pickled with the
    configuration into the worker, the socket's descriptor goes with it (multiprocessing passes it,
    as uvicorn's own sockets), and the worker has it before its app is made (:meth:`load`)."""

    kmip_socket: socket.socket | None = None

    def load(self) -> None:
        hand_over_kmip(self.kmip_socket)
        super().load()


def serve(options: ServeOptions, listeners: Listeners) -> None:
    """Run the service on ``listeners`` (:func:`bind_listeners`) until interrupted; plain HTTP when
    no certificate is given. Exits with uvicorn's start-up failure status when the workers cannot start."""
    tls: dict[str, Any] = {}
    if options.tls_cert is not None and options.tls_key is not None:
        tls = {
            "ssl_certfile": str(options.tls_cert),
            "ssl_keyfile": str(options.tls_key),
            "ssl_context_factory": tls12_context,
        }
        if options.client_ca is not None:
            tls["ssl_ca_certs"] = str(options.client_ca)
            tls["ssl_cert_reqs"] = ssl.CERT_OPTIONAL
    config = _WorkerConfig(
        APP_FACTORY,
        factory=True,
        host=options.host,
        port=options.port,
        workers=options.workers,
        http="keymanager.serving.protocol:ClientCertProtocol",
        loop="keymanager.serving.protocol:new_event_loop",
        timeout_keep_alive=options.keepalive_timeout,
        log_level=options.log_level,
        log_config=None,  # the service's own format (api/logs.py), set up in each process
        access_log=False,  # the access log is the service's own (KM_ACCESS_LOG)
        server_header=False,
        proxy_headers=False,  # who may name the client: serving/client_address.py (KM_TRUSTED_PROXIES)
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        **tls,
    )
    config.kmip_socket = listeners.kmip
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        if options.workers > 1:
            Multiprocess(config, sockets=[listeners.https]).run()
        else:
            server.run(sockets=[listeners.https])
    if options.workers == 1 and not server.started:
        sys.exit(STARTUP_FAILURE)
