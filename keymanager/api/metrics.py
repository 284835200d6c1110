"""Prometheus metrics: requests by route and status, latencies, HSM operations, the audit queue.

With several worker processes, ``keymanager serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a
fresh directory before the workers start; each worker then writes its samples there and
``/metrics`` (in any worker) adds up every worker's. Without it, one process's registry is used.
"""

from __future__ import annotations

import os
import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_FAST = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

REQUESTS = Counter("km_requests_total", "HTTP requests answered", ["route", "method", "status"])
REQUEST_SECONDS = Histogram("km_request_duration_seconds", "Time to answer a request", ["route"], buckets=_FAST)
HSM_SECONDS = Histogram("km_hsm_operation_seconds", "Time of one call to the HSM", ["operation"], buckets=_FAST)
HSM_ERRORS = Counter("km_hsm_errors_total", "HSM calls that failed", ["operation"])
HSM_TIMEOUTS = Counter("km_hsm_timeouts_total", "HSM calls given up at their deadline", ["operation"])
AUDIT_QUEUE = Gauge("km_audit_queue_depth", "Audit records waiting to be committed", multiprocess_mode="livesum")
AUTH_FAILURES = Counter("km_auth_failures_total", "Requests refused with 401: no or an unknown credential")
AUTH_THROTTLED = Counter("km_auth_throttled_total", "Requests refused with 429 after too many failed authentications")
CACHE_ENTRIES = Gauge(
    "km_cache_entries", "Principals and keys cached by the workers", ["cache"], multiprocess_mode="livesum"
)
CACHE_EVICTIONS = Counter("km_cache_evictions_total", "Cache entries evicted to stay within the bound", ["cache"])


def observe_hsm(operation: str, seconds: float, failed: bool) -> None:
    """Record one HSM call (the HSM adapter's observer)."""
    HSM_SECONDS.labels(operation).observe(seconds)
    if failed:
        HSM_ERRORS.labels(operation).inc()


def observe_hsm_timeout(operation: str) -> None:
    """Count one HSM call given up at its deadline (the HSM adapter's ``on_timeout``)."""
    HSM_TIMEOUTS.labels(operation).inc()


def observe_audit_queue(depth: int) -> None:
    """Record the audit writer's queue depth (the audit log's observer)."""
    AUDIT_QUEUE.set(depth)


def observe_cache(table: str, entries: int, evicted: int) -> None:
    """Record a metadata cache table's size and evictions (the cache's observer)."""
    CACHE_ENTRIES.labels(table).set(entries)
    if evicted:
        CACHE_EVICTIONS.labels(table).inc(evicted)


def exposition() -> tuple[bytes, str]:
    """The Prometheus text of every worker's metrics, and its content type."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


class RequestMetrics:
    """ASGI middleware counting requests by route template, method and status, and timing them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            REQUESTS.labels(route, scope["method"], str(status)).inc()
            REQUEST_SECONDS.labels(route).observe(time.perf_counter() - start)
