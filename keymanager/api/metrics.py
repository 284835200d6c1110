"""Prometheus metrics: requests by route and status, latencies, HSM operations, the audit queue,
audit write failures, the database pool, keys by state, build information, and each worker
process's own metrics.

With several worker processes, ``keymanager serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a
fresh directory before the workers start; each worker then writes its samples there and
``/metrics`` (in any worker) adds up every worker's. Without it, one process's registry is used
(with prometheus_client's own process, platform and GC collectors).

prometheus_client's process and GC collectors only see the process they run in, so in
multiprocess mode ``/metrics`` builds them itself (:class:`WorkerMetrics`): every live worker's
``process_*`` metrics read from ``/proc/<pid>`` at scrape time, and its ``python_gc_*`` counts as
the worker last sampled them (:meth:`Metrics.sample_worker`, every ``SAMPLE_SECONDS``), each with a
``pid`` label; the worker processes are the ones that wrote samples to the directory.

No collector exists before :func:`keymanager.api.app.create_app` makes a :class:`Metrics` for its
application: each has its collectors in a registry of its own, so applications made in one process
(tests make many) neither share samples nor collide on names. In multiprocess mode the samples
are the process's (files named after its pid), as only one application serves in a worker.

Requests and HSM calls, several per request, are counted and timed in plain Python first
(:class:`Tally`) and written into their collectors by :meth:`Metrics.flush`, every
``FLUSH_SECONDS`` and before each scrape. In multiprocess mode every sample prometheus_client
takes is a write to a memory-mapped file under a lock: five per 1 KB encrypt, 9.6 to 9.8 µs of
CPU against 1.2 to 2.1 µs through the tally, flush included (one request and one HSM call
observed 50,000 times in one process, 2026-12-04). So a scrape may miss another worker's
requests of the last second, and a worker that dies loses at most that second's.
"""

from __future__ import annotations

import bisect
import functools
import gc
import os
import platform
import re
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.samples import Sample

from keymanager import __version__

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_FAST = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

MAX_REQUEST_SERIES = 1000
"""How many (route, method, status) series of the request metrics keep their children at hand."""
FLUSH_SECONDS = 1.0
"""How often each worker writes the requests and HSM calls it counted (:class:`Tally`) into its collectors."""
SAMPLE_SECONDS = 5.0
"""How often each worker samples its database pool and its garbage collector."""
KEY_COUNT_SECONDS = 10.0
"""Key counts are read from the database at most this often (per worker)."""
_GC_FIELDS = [
    ("collections", "python_gc_collections", "Number of times this generation was collected"),
    ("collected", "python_gc_objects_collected", "Objects collected during gc"),
    ("uncollectable", "python_gc_objects_uncollectable", "Uncollectable objects found during GC"),
]
_PID_FILE = re.compile(r"_(\d+)\.db$")
K = TypeVar("K", bound=Hashable)


class Metrics:
    """The collectors of one application, and what records into them (the services' observer,
    the gateway, the authentication throttle)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.multiprocess_dir = os.environ.get(MULTIPROC_ENV)
        counter = functools.partial(Counter, registry=self.registry)
        gauge = functools.partial(Gauge, registry=self.registry)
        histogram = functools.partial(Histogram, registry=self.registry, buckets=_FAST)
        self.requests = counter("km_requests_total", "HTTP requests answered", ["route", "method", "status"])
        self.request_seconds = histogram("km_request_duration_seconds", "Time to answer a request", ["route"])
        self.hsm_seconds = histogram("km_hsm_operation_seconds", "Time of one call to the HSM", ["operation"])
        self.hsm_errors = counter("km_hsm_errors_total", "HSM calls that failed", ["operation"])
        self.hsm_timeouts = counter("km_hsm_timeouts_total", "HSM calls given up at their deadline", ["operation"])
        self.audit_queue = gauge(
            "km_audit_queue_depth", "Audit records waiting to be committed", multiprocess_mode="livesum"
        )
        self.auth_failures = counter("km_auth_failures_total", "Requests refused with 401: no or an unknown credential")
        self.auth_throttled = counter(
            "km_auth_throttled_total", "Requests refused with 429 after too many failed authentications"
        )
        self.connections_refused = counter(
            "km_connections_refused_total",
            "Connections refused before a whole request: bad HTTP, slow or large heads, TLS failures, PROXY headers",
            ["reason"],
        )
        self.cache_entries = gauge(
            "km_cache_entries", "Principals and keys cached by the workers", ["cache"], multiprocess_mode="livesum"
        )
        self.cache_evictions = counter(
            "km_cache_evictions_total", "Cache entries evicted to stay within the bound", ["cache"]
        )
        self.build_info = gauge(
            "km_build_info",
            "The running keymanager: version and Python (always 1)",
            ["version", "python"],
            multiprocess_mode="max",
        )
        self.audit_write_failures = counter(
            "km_audit_write_failures_total", "Audit records that could not be written (their requests failed closed)"
        )
        self.db_pool_in_use = gauge(
            "km_db_pool_connections_in_use",
            "Database connections checked out of the workers' pools (each worker's sampled every few seconds)",
            multiprocess_mode="livesum",
        )
        self.keys = gauge(
            "km_keys", "Keys by state, counted in the database", ["state"], multiprocess_mode="mostrecent"
        )
        # Python's garbage collector per worker (multiprocess mode only: in one process, prometheus_client's
        # GCCollector reports them). Not registered: written to the multiprocess files, read by WorkerMetrics.
        self.gc = {
            field: Gauge(name, doc, ["generation"], registry=None, multiprocess_mode="all")
            for field, name, doc in _GC_FIELDS
        }
        self._request_series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._requests: Tally[tuple[str, str, int]] = Tally(_FAST)
        self._hsm_calls: Tally[tuple[str, bool]] = Tally(_FAST)
        if self.multiprocess_dir is None:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one request answered with ``status`` by route template and method, and time it
        (written into the collectors at the next :meth:`flush`)."""
        self._requests.add((route, method, status), seconds)

    def observe_hsm(self, operation: str, seconds: float, failed: bool) -> None:
        """Record one HSM call (written into the collectors at the next :meth:`flush`)."""
        self._hsm_calls.add((operation, failed), seconds)

    def flush(self) -> None:
        """Write the requests and HSM calls counted since the last flush into their collectors.

        The labelled children of each (route, method, status) are looked up once: prometheus_client's
        ``labels()`` costs more than the sample it leads to. Routes are templates, methods those the
        HTTP parser knows, so the series are few; past :data:`MAX_REQUEST_SERIES` they are looked up
        each time."""
        for (route, method, status), counts in self._requests.take().items():
            children = self._request_series.get((route, method, status))
            if children is None:
                children = (self.requests.labels(route, method, str(status)), self.request_seconds.labels(route))
                if len(self._request_series) < MAX_REQUEST_SERIES:
                    self._request_series[(route, method, status)] = children
            children[0].inc(counts.count)
            counts.into(children[1])
        for (operation, failed), counts in self._hsm_calls.take().items():
            counts.into(self.hsm_seconds.labels(operation))
            if failed:
                self.hsm_errors.labels(operation).inc(counts.count)

    def observe_hsm_timeout(self, operation: str) -> None:
        """Count one HSM call given up at its deadline."""
        self.hsm_timeouts.labels(operation).inc()

    def observe_audit_queue(self, depth: int) -> None:
        """Record the audit writer's queue depth."""
        self.audit_queue.set(depth)

    def observe_audit_failure(self) -> None:
        """Count one audit record that could not be written."""
        self.audit_write_failures.inc()

    def observe_cache(self, table: str, entries: int, evicted: int) -> None:
        """Record a metadata cache table's size and evictions."""
        self.cache_entries.labels(table).set(entries)
        if evicted:
            self.cache_evictions.labels(table).inc(evicted)

    def observe_auth_failure(self) -> None:
        """Count one request refused with 401 (no or an unknown credential)."""
        self.auth_failures.inc()

    def observe_auth_throttled(self) -> None:
        """Count one request refused after too many failed authentications of its address."""
        self.auth_throttled.inc()

    def observe_connection_refused(self, reason: str) -> None:
        """Count one connection refused before a whole request arrived (``serving/refusals.py``)."""
        self.connections_refused.labels(reason).inc()

    def start_worker(self) -> None:
        """Record this worker's build information (which also makes it known to ``/metrics``)."""
        self.build_info.labels(__version__, platform.python_version()).set(1)

    def sample_worker(self, pool_in_use: int) -> None:
        """Record this worker's database connections in use and, in multiprocess mode, its GC counts;
        write what it counted meanwhile (:meth:`flush`)."""
        self.flush()
        self.db_pool_in_use.set(pool_in_use)
        if self.multiprocess_dir:
            for generation, stats in enumerate(gc.get_stats()):
                for field, gauge in self.gc.items():
                    gauge.labels(str(generation)).set(stats[field])

    def exposition(self, before: Callable[[], None] | None = None) -> tuple[bytes, str]:
        """The Prometheus text of every worker's metrics, and its content type (``before`` runs first)."""
        if before is not None:
            before()
        if self.multiprocess_dir:
            registry = CollectorRegistry()
            registry.register(WorkerMetrics(Path(self.multiprocess_dir), {g._name for g in self.gc.values()}))
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Observed:
    """What a :class:`Tally` counted of one series: how many, their sum, and how many fell in each
    bucket (the first whose upper bound is at least the value, the last ``+Inf``), not cumulated."""

    __slots__ = ("buckets", "count", "total")

    def __init__(self, buckets: int) -> None:
        self.count = 0
        self.total = 0.0
        self.buckets = [0] * buckets

    def into(self, histogram: Histogram) -> None:
        """Add these observations to a labelled child of a histogram of the same buckets, as that many
        ``observe`` calls would (its sum and the buckets' values: prometheus_client has no public call
        that observes more than one value; ``tests/api/test_metrics.py`` holds this to ``observe``)."""
        histogram._sum.inc(self.total)
        for value, count in zip(histogram._buckets, self.buckets, strict=True):
            if count:
                value.inc(count)


class Tally(Generic[K]):
    """Observations of several series (a hashable key each) in plain Python, taken all at once by
    whoever writes them into the collectors (:meth:`Metrics.flush`). The event loop and the HSM
    thread both add: a lock keeps every observation."""

    def __init__(self, bounds: Iterable[float]) -> None:
        self._bounds = tuple(bounds)
        self._lock = threading.Lock()
        self._pending: dict[K, Observed] = {}

    def add(self, key: K, value: float) -> None:
        """Count ``value`` in ``key``'s series."""
        bucket = bisect.bisect_left(self._bounds, value)  # the first bound >= value, as observe() does
        with self._lock:
            observed = self._pending.get(key)
            if observed is None:
                observed = self._pending[key] = Observed(len(self._bounds) + 1)
            observed.count += 1
            observed.total += value
            observed.buckets[bucket] += 1

    def take(self) -> dict[K, Observed]:
        """Every series observed since the last take, and start afresh."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending


class KeyCounts:
    """``km_keys{state}`` from ``count`` (a query), refreshed at most every ``KEY_COUNT_SECONDS``."""

    def __init__(self, gauge: Gauge, count: Callable[[], dict[str, int]], states: Iterable[str]) -> None:
        self._gauge = gauge
        self._count = count
        self._states = tuple(states)
        self._lock = threading.Lock()
        self._at = -KEY_COUNT_SECONDS

    def refresh(self) -> None:
        """Count the keys when the last count is older than ``KEY_COUNT_SECONDS``; a failed count is skipped."""
        with self._lock:
            if time.monotonic() - self._at < KEY_COUNT_SECONDS:
                return
            self._at = time.monotonic()
            try:
                counts = self._count()
            except Exception:  # the database is down: /metrics still answers, with the last counts
                return
            for state in self._states:
                self._gauge.labels(state).set(counts.get(state, 0))


class WorkerMetrics:
    """Every worker's samples, summed as each metric says; every live worker's process metrics and
    GC counts (as counters, with a ``pid`` label); and ``python_info``."""

    def __init__(self, directory: Path, gc_names: set[str]) -> None:
        self.directory = directory
        self.gc_names = gc_names

    def collect(self) -> Iterable[Metric]:
        live = sorted(pid for pid in _pids_of(self.directory) if Path(f"/proc/{pid}").exists())
        wanted = {str(pid) for pid in live}
        for family in MultiProcessCollector(None, path=str(self.directory)).collect():  # type: ignore[no-untyped-call]
            yield _as_counter(family, wanted) if family.name in self.gc_names else family
        yield from PlatformCollector(registry=None).collect()
        families: dict[str, Metric] = {}
        for pid in live:
            for family in ProcessCollector(pid=functools.partial(int, pid), registry=None).collect():
                into = families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
                into.samples += [s._replace(labels={**s.labels, "pid": str(pid)}) for s in family.samples]
        yield from families.values()


def _pids_of(directory: Path) -> set[int]:
    """The processes that wrote samples to the multiprocess ``directory``."""
    return {int(m.group(1)) for p in directory.glob("*.db") if (m := _PID_FILE.search(p.name))}


def _as_counter(family: Metric, pids: set[str]) -> Metric:
    """A GC gauge family of the multiprocess files as a counter (``<name>_total``), of ``pids`` only."""
    counter = Metric(family.name, family.documentation, "counter")
    counter.samples = [
        Sample(s.name + "_total", s.labels, s.value) for s in family.samples if s.labels.get("pid") in pids
    ]
    return counter
