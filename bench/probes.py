"""What the service spends: CPU time of its processes over a window, peak RSS of its workers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import psutil

RSS_INTERVAL = 0.05


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds used so far by ``pids`` (processes that are gone count 0)."""
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


class RssSampler:
    """Samples the resident set size of some processes in a thread; keeps each one's peak (bytes)."""

    def __init__(self, pids: Callable[[], Sequence[int]]) -> None:
        self.pids = pids
        self.peaks: dict[int, int] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def __enter__(self) -> RssSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()

    def loop(self) -> None:
        """Sample every ``RSS_INTERVAL`` until stopped."""
        while not self.stopping.is_set():
            self.sample()
            self.stopping.wait(RSS_INTERVAL)

    def sample(self) -> None:
        """Read each process's RSS once."""
        for pid in self.pids():
            try:
                rss = psutil.Process(pid).memory_info().rss
            except psutil.NoSuchProcess:
                continue
            self.peaks[pid] = max(self.peaks.get(pid, 0), rss)


class ServerProbe:
    """A service's processes as far as they are known: all of them for CPU, the workers for RSS."""

    def __init__(self, pids: Callable[[], Sequence[int]], workers: Callable[[], Sequence[int]]) -> None:
        self.pids = pids
        self.workers = workers

    @classmethod
    def none(cls) -> ServerProbe:
        """A probe of nothing (a service whose processes are unknown)."""
        return cls(list, list)

    @property
    def known(self) -> bool:
        """True when there are processes to measure."""
        return bool(self.pids())
