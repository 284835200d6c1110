"""Throttling failed authentications per client address, and summing them up for the audit log.

Each client address has a token bucket: every failed authentication takes a token, tokens come
back at ``rate`` per second up to ``burst``. An address with an empty bucket is refused (429)
before its credentials are looked up, so a flood of guessed tokens costs neither database reads
nor audit records. The table of addresses is a bounded LRU: whoever sends from many addresses
evicts old ones, never grows the table.

The audit log gets at most one record per address per ``summary_seconds``: the first failure
of an interval is recorded at once, the ones after it are counted and written as one summary
when the interval is over (:meth:`AuthThrottle.due`, called periodically). Counts of evicted
addresses are summed up in one record without an address.

One throttle per process, used from its event loop only (no lock).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class FailureSummary:
    """Failed authentications and throttled requests of one address (None: of evicted addresses)."""

    client: str | None
    failures: int
    throttled: int
    addresses: int = 1


@dataclass
class _Address:
    tokens: float
    updated: float
    reported: float
    failures: int = 0
    throttled: int = 0


class AuthThrottle:
    """Token buckets of failed authentications per client address (see the module docstring)."""

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        max_addresses: int,
        summary_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        on_failure: Callable[[], None] = lambda: None,
        on_refusal: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_failure`` and ``on_refusal`` are called for each failed authentication and each
        request refused with 429 (for metrics)."""
        self.rate = rate
        self.burst = burst
        self.max_addresses = max_addresses
        self.summary_seconds = summary_seconds
        self._clock = clock
        self._on_failure = on_failure
        self._on_refusal = on_refusal
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._evicted = FailureSummary(None, 0, 0, 0)
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._addresses)

    def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` may fail once more, or None when it may fail now."""
        state = self._addresses.get(client)
        if state is None:
            return None
        self._refill(state, self._clock())
        if state.tokens >= 1:
            return None
        return max(1, math.ceil((1 - state.tokens) / self.rate))

    def failed(self, client: str) -> FailureSummary | None:
        """Count one failed authentication of ``client``; the summary to record now, if one is due."""
        self._on_failure()
        state = self._state(client)
        state.tokens = max(0.0, state.tokens - 1)
        state.failures += 1
        return self._due_now(client, state)

    def refused(self, client: str) -> FailureSummary | None:
        """Count one request of ``client`` refused with 429; the summary to record now, if one is due."""
        self._on_refusal()
        state = self._state(client)
        state.throttled += 1
        return self._due_now(client, state)

    def due(self, *, everything: bool = False) -> list[FailureSummary]:
        """Summaries of counts whose interval is over (``everything``: all counts, e.g. at shutdown)."""
        now = self._clock()
        found = []
        for client, state in self._addresses.items():
            if (state.failures or state.throttled) and (everything or now - state.reported >= self.summary_seconds):
                found.append(self._take(client, state, now))
        if self._evicted.addresses:
            found.append(self._evicted)
            self._evicted = FailureSummary(None, 0, 0, 0)
        return found

    def _state(self, client: str) -> _Address:
        now = self._clock()
        state = self._addresses.get(client)
        if state is None:
            state = _Address(tokens=float(self.burst), updated=now, reported=-math.inf)
            self._addresses[client] = state
            if len(self._addresses) > self.max_addresses:
                self._evict()
        else:
            self._addresses.move_to_end(client)
            self._refill(state, now)
        return state

    def _evict(self) -> None:
        _, old = self._addresses.popitem(last=False)
        self.evictions += 1
        if old.failures or old.throttled:
            sum_ = self._evicted
            self._evicted = FailureSummary(
                None, sum_.failures + old.failures, sum_.throttled + old.throttled, sum_.addresses + 1
            )

    def _refill(self, state: _Address, now: float) -> None:
        state.tokens = min(float(self.burst), state.tokens + (now - state.updated) * self.rate)
        state.updated = now

    def _due_now(self, client: str, state: _Address) -> FailureSummary | None:
        now = self._clock()
        if now - state.reported < self.summary_seconds:
            return None
        return self._take(client, state, now)

    def _take(self, client: str, state: _Address, now: float) -> FailureSummary:
        summary = FailureSummary(client, state.failures, state.throttled)
        state.failures = state.throttled = 0
        state.reported = now
        return summary
