"""Reading a counter of a server's ``/metrics`` once every worker has written what it counted.

Each worker writes the requests it counted into the shared samples every
``metrics.FLUSH_SECONDS`` (``keymanager/api/metrics.py``), so a scrape answered by one worker may
not show the other's last second yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from keymanager.api import metrics


def settled(read: Callable[[], float]) -> float:
    """``read()`` once two readings a flush and a half apart agree (at most 20 tries)."""
    last = read()
    for _ in range(20):
        time.sleep(1.5 * metrics.FLUSH_SECONDS)
        now = read()
        if now == last:
            return now
        last = now
    return last


def reaches(read: Callable[[], float], expected: float, *, within: float = 10.0) -> float:
    """``read()`` as soon as it is ``expected``, or its last value after ``within`` seconds."""
    deadline = time.monotonic() + within
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
    return value
