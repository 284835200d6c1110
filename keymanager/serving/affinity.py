"""The CPUs a replica may use: how many workers it runs by default, and each worker on a CPU of its own.

A worker's threads hand every request to one another (event loop → HSM thread → event loop →
audit writer → event loop). When the kernel spreads them over several CPUs, each hand-over
wakes another CPU and the data moves between caches; pinned to one CPU, the same work costs
less. On the 2-core development machine, 2 workers, 1 KB fields over HTTPS with wrk (4 pairs of
interleaved runs, a noisy VM): +4 to +26 % requests/s, up to 15 % less service CPU per request.
The GIL lets only one of a worker's threads run Python at a time anyway, so little parallelism
is lost.

Each worker claims the first free CPU of the process's allowed set by locking
``<var_dir>/run/cpu-<n>.lock`` for as long as it lives; the kernel drops the lock when the
worker exits, so a restarted worker takes the CPU its predecessor left. A worker that finds no
free CPU (more workers than CPUs) stays unpinned.

Pinning is only safe where the CPUs are this replica's: on a node shared with other containers,
each container's workers would claim the same first CPUs (every container has its own claims),
and the kernel could not move them away. So when ``KM_CPU_AFFINITY`` is not set,
``keymanager serve`` pins the workers only when :meth:`CpuBudget.pinning` finds it safe:

* the process's allowed CPU set (``os.sched_getaffinity``: ``taskset``, a cpuset cgroup,
  Kubernetes' static CPU manager) holds at least one CPU per worker;
* no cgroup CPU quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``: Docker's ``--cpus``, a
  Kubernetes CPU limit, systemd's ``CPUQuota=``) gives it less CPU time than its allowed set.

A container with neither a CPU limit nor a cpuset of its own cannot tell whether it shares the
machine (the development machine is such a container, and runs keymanager alone): where several
of them share a node's CPUs, set ``KM_CPU_AFFINITY=false`` or give each a CPU limit.

The default worker count (:meth:`CpuBudget.workers`) is the number of allowed CPUs, lowered to
the quota where one is set (a pod limited to 2 CPUs on a 64-core node runs 2 workers).
``KM_CPU_AFFINITY=true`` or ``false`` and ``--workers`` / ``KM_WORKERS`` decide regardless.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")

_claimed: list[int] = []
"""The open lock file of this process's CPU (kept open for the process's life)."""


@dataclass(frozen=True)
class CpuBudget:
    """What this process may use of the machine's CPUs."""

    allowed: frozenset[int]
    """The CPUs the kernel lets the process run on."""
    quota: float | None
    """The tightest cgroup CPU quota above the process, in CPUs; None when none is set."""

    @classmethod
    def of_this_process(cls, cgroup_root: Path = CGROUP_ROOT) -> CpuBudget:
        """The budget of the calling process, read from the kernel and its cgroups."""
        allowed = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
        try:
            membership = Path("/proc/self/cgroup").read_text()
        except OSError:
            membership = ""
        return cls(allowed, cgroup_cpu_quota(cgroup_root, membership))

    def workers(self) -> int:
        """The default number of workers: one per allowed CPU, no more than the quota allows (at least 1)."""
        count = max(1, len(self.allowed))
        if self.quota is not None:
            count = min(count, max(1, math.floor(self.quota)))
        return count

    def pinning(self, workers: int) -> tuple[bool, str]:
        """Whether ``workers`` workers may each be pinned to a CPU of their own, and why (for the log)."""
        if not hasattr(os, "sched_setaffinity") or not self.allowed:
            return False, "this platform cannot pin processes"
        if workers > len(self.allowed):
            return False, f"{workers} workers for {len(self.allowed)} allowed CPUs"
        if self.quota is not None and self.quota < len(self.allowed):
            return False, f"a CPU quota of {self.quota:g} CPUs for {len(self.allowed)} allowed CPUs"
        return True, f"{len(self.allowed)} allowed CPUs, no CPU quota below them"


def cgroup_cpu_quota(root: Path, membership: str) -> float | None:
    """The tightest CPU quota, in CPUs, of the cgroups in ``membership`` (``/proc/self/cgroup``) and
    their parents, under the cgroup mount ``root`` (v2: ``cpu.max``; v1: the ``cpu`` controller's
    ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``); None when no quota is set."""
    quotas: list[float] = []
    for line in membership.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            quotas += [q for d in _ancestry(root, path) if (q := _v2_quota(d)) is not None]
        elif "cpu" in controllers.split(","):
            base = root / controllers if (root / controllers).is_dir() else root / "cpu"
            quotas += [q for d in _ancestry(base, path) if (q := _v1_quota(d)) is not None]
    return min(quotas, default=None)


def _ancestry(base: Path, path: str) -> list[Path]:
    """``base/path`` and its parents up to ``base``, those that exist (in a container without its own
    cgroup namespace, the host's path does not exist, and the mount itself is the container's cgroup)."""
    relative = Path(path.lstrip("/"))
    here = base / relative
    return [d for d in [here, *here.parents][: len(relative.parts) + 1] if d.is_dir()]


def _v2_quota(directory: Path) -> float | None:
    try:
        fields = (directory / "cpu.max").read_text().split()
    except OSError:
        return None
    if len(fields) != 2 or fields[0] == "max":
        return None
    return int(fields[0]) / int(fields[1])


def _v1_quota(directory: Path) -> float | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def claim_cpu(run_dir: Path, allowed: set[int]) -> tuple[int, int] | None:
    """Lock the first free CPU of ``allowed``: ``(cpu, fd of its lock file)``, or None when all are taken."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for cpu in sorted(allowed):
        fd = os.open(run_dir / f"cpu-{cpu}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return cpu, fd
    return None


def pin_worker(run_dir: Path) -> int | None:
    """Pin this process (every thread it has, and those it starts later) to a CPU of its own,
    one of its allowed set.

    Returns the CPU, or None when the platform cannot pin or every allowed CPU is taken.
    """
    if not hasattr(os, "sched_setaffinity") or _claimed:
        return None
    try:
        claim = claim_cpu(run_dir, os.sched_getaffinity(0))
    except OSError as exc:
        log.warning("not pinning the worker to a CPU: %s", type(exc).__name__)
        return None
    if claim is None:
        return None
    cpu, fd = claim
    _claimed.append(fd)
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            os.sched_setaffinity(int(task.name), {cpu})
    return cpu
