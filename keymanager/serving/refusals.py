"""Connections refused before a whole request arrived, counted and logged in bounded volume.

A stranger can make a connection refused hundreds of times a second (malformed HTTP: 400; a head
too slow or too large: 408 / 431; a failed TLS handshake; a bad or unexpected PROXY header), so
no refusal writes a log line of its own. :class:`ConnectionRefusals` logs the first refusal of an
address at once, then at most one line per address per ``KM_REFUSAL_LOG_SECONDS`` with the
count of each reason since; every refusal is counted in the metrics
(``km_connections_refused_total{reason}``, through :attr:`ConnectionRefusals.observer`). The
table of addresses is a bounded LRU; the counts of evicted addresses are logged as one sum.

One per process (:func:`connection_refusals`), used from its event loop only (no lock).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from keymanager.config import Settings

log = logging.getLogger(__name__)

MAX_ADDRESSES = 10_000
REASONS = {
    "bad_request": "400: not valid HTTP",
    "head_timeout": "408: the request head did not arrive in time",
    "head_too_large": "431: the request head is larger than the limit",
    "tls": "the TLS handshake failed",
    "proxy_header": "a missing, malformed or slow PROXY header",
    "untrusted_proxy_header": "a PROXY header from an address not in KM_TRUSTED_PROXIES",
    "kmip_header": "a KMIP message header that is not a request message's, or longer than KM_KMIP_MAX_MESSAGE_BYTES",
    "kmip_timeout": "a KMIP message that did not arrive (or whose answer was not read) in time",
}
"""The reasons a connection is refused for (the metrics' ``reason`` label), and what each means.
Every reason used is here (``tests/serving/test_refusal_reasons.py`` reads every call); one that
is not would still be counted and logged, by its name."""


@dataclass
class _Address:
    reported: float
    pending: Counter[str] = field(default_factory=Counter)


class ConnectionRefusals:
    """Counts and summary log lines of refused connections (see the module docstring)."""

    def __init__(
        self, *, interval: float, max_addresses: int = MAX_ADDRESSES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self.max_addresses = max_addresses
        self._clock = clock
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._evicted: Counter[str] = Counter()
        self._evicted_addresses = 0
        self._flush: asyncio.TimerHandle | None = None
        self.observer: Callable[[str], None] | None = None
        """Called with the reason of every refusal (the metrics)."""

    def __len__(self) -> int:
        return len(self._addresses)

    def refused(self, address: str, reason: str) -> None:
        """Count one connection from ``address`` refused for ``reason`` (a key of :data:`REASONS`)."""
        if self.observer is not None:
            self.observer(reason)
        now = self._clock()
        state = self._addresses.get(address)
        if state is None:
            state = self._addresses[address] = _Address(reported=-math.inf)
            if len(self._addresses) > self.max_addresses:
                self._evict()
        else:
            self._addresses.move_to_end(address)
        if not state.pending and now - state.reported >= self.interval:
            state.reported = now
            log.warning(
                "connection from %s refused: %s (more from this address are summed up every %g s)",
                address,
                _meaning(reason),
                self.interval,
            )
            return
        state.pending[reason] += 1
        self._schedule()

    def flush(self, *, everything: bool = False) -> None:
        """Log the counts whose interval is over (``everything``: all of them)."""
        self._flush = None
        now = self._clock()
        for address, state in self._addresses.items():
            if state.pending and (everything or now - state.reported >= self.interval):
                _log_counts(f"from {address}", state.pending)
                state.pending = Counter()
                state.reported = now
        if self._evicted:
            _log_counts(f"from {self._evicted_addresses} other addresses", self._evicted)
            self._evicted, self._evicted_addresses = Counter(), 0
        if any(state.pending for state in self._addresses.values()):
            self._schedule()

    def _schedule(self) -> None:
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self.interval, self.flush)

    def _evict(self) -> None:
        _, old = self._addresses.popitem(last=False)
        if old.pending:
            self._evicted.update(old.pending)
            self._evicted_addresses += 1
            self._schedule()


def _log_counts(whom: str, counts: Counter[str]) -> None:
    total = sum(counts.values())
    reasons = ", ".join(f"{count} {_meaning(reason)}" for reason, count in sorted(counts.items()))
    log.warning("%d more connections %s refused (%s)", total, whom, reasons)


def _meaning(reason: str) -> str:
    """What ``reason`` means (its own name for one missing from :data:`REASONS`: no refusal of one
    address may stop the others' from being logged)."""
    return REASONS.get(reason, reason)


@functools.cache
def connection_refusals() -> ConnectionRefusals:
    """This process's refusals, from its settings (read once: every worker has its own)."""
    return ConnectionRefusals(interval=Settings().refusal_log_seconds)
