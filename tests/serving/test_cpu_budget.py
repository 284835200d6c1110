"""How many workers ``keymanager serve`` runs by default, and when it pins them (``serving/affinity.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from keymanager.cli.main import parser
from keymanager.config import Settings
from keymanager.serving import plan_workers
from keymanager.serving.affinity import CpuBudget, cgroup_cpu_quota


def budget(cpus: int, *, quota: float | None = None) -> CpuBudget:
    return CpuBudget(frozenset(range(cpus)), quota)


@pytest.mark.parametrize(
    ("cpus", "quota", "workers"),
    [(2, None, 2), (64, None, 64), (64, 2.0, 2), (64, 1.5, 1), (64, 0.25, 1), (2, 8.0, 2)],
)
def test_the_default_is_one_worker_per_cpu_the_quota_allows(cpus: int, quota: float | None, workers: int) -> None:
    assert budget(cpus, quota=quota).workers() == workers


def test_pinning_is_safe_on_cpus_of_its_own() -> None:
    assert budget(2).pinning(2)[0]  # a host or VM of its own (the development machine)
    assert budget(2).pinning(1)[0]
    assert CpuBudget(frozenset({8, 9, 10, 11}), None).pinning(4)[
        0
    ]  # an exclusive cpuset (Kubernetes' static CPU manager)
    assert budget(2, quota=2.0).pinning(2)[0]  # a quota that leaves every allowed CPU usable


@pytest.mark.parametrize(
    ("cpus", "quota", "workers", "why"),
    [
        (2, None, 3, "3 workers for 2 allowed CPUs"),
        (64, 2.0, 2, "a CPU quota of 2 CPUs for 64 allowed CPUs"),  # a container limited to 2 CPUs
        (8, 0.5, 1, "a CPU quota of 0.5 CPUs"),
    ],
)
def test_pinning_is_off_where_other_tenants_may_claim_the_same_cpus(
    cpus: int, quota: float | None, workers: int, why: str
) -> None:
    pinned, reason = budget(cpus, quota=quota).pinning(workers)
    assert not pinned
    assert reason.startswith(why)


def test_flag_then_setting_then_cpus_decide_the_workers_and_an_explicit_affinity_wins() -> None:
    shared = budget(16, quota=2.0)
    assert plan_workers(Settings(), None, budget(2)).workers == 2
    assert plan_workers(Settings(workers=3), None, budget(2)).workers == 3
    assert plan_workers(Settings(workers=3), 1, budget(2)).workers == 1
    assert plan_workers(Settings(), None, shared).workers == 2
    assert plan_workers(Settings(), None, budget(2)).pinned
    assert not plan_workers(Settings(), None, shared).pinned
    assert plan_workers(Settings(cpu_affinity=True), None, shared).pinned
    forced_off = plan_workers(Settings(cpu_affinity=False), None, budget(2))
    assert not forced_off.pinned and forced_off.reason == "KM_CPU_AFFINITY=false"


def test_the_environment_sets_workers_and_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KM_WORKERS", "5")
    monkeypatch.setenv("KM_CPU_AFFINITY", "false")
    settings = Settings()
    assert (settings.workers, settings.cpu_affinity) == (5, False)
    monkeypatch.delenv("KM_WORKERS")
    monkeypatch.delenv("KM_CPU_AFFINITY")
    assert (Settings().workers, Settings().cpu_affinity) == (None, None)


def write(directory: Path, **files: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name.replace("_", ".", 1)).write_text(text + "\n")


def test_a_cgroup_v2_quota_anywhere_above_the_process_counts(tmp_path: Path) -> None:
    write(tmp_path / "kubepods.slice", cpu_max="400000 100000")
    write(tmp_path / "kubepods.slice" / "pod1", cpu_max="150000 100000")
    write(tmp_path / "kubepods.slice" / "pod1" / "app", cpu_max="max 100000")
    assert cgroup_cpu_quota(tmp_path, "0::/kubepods.slice/pod1/app") == 1.5
    assert cgroup_cpu_quota(tmp_path, "0::/kubepods.slice") == 4.0
    write(tmp_path / "system.slice" / "keymanager.service", cpu_max="max 100000")
    assert cgroup_cpu_quota(tmp_path, "0::/system.slice/keymanager.service") is None
    write(tmp_path, cpu_max="200000 100000")  # a container's own namespace: its cgroup is the mount
    assert cgroup_cpu_quota(tmp_path, "0::/") == 2.0


def test_a_cgroup_v1_quota_of_the_cpu_controller_counts(tmp_path: Path) -> None:
    controller = tmp_path / "cpu,cpuacct"
    write(controller / "docker" / "abc", cpu_cfs_quota_us="50000", cpu_cfs_period_us="100000")
    membership = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n"
    assert cgroup_cpu_quota(tmp_path, membership) == 0.5
    write(controller / "docker" / "abc", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    assert cgroup_cpu_quota(tmp_path, membership) is None
    # Inside the container, the host's path does not exist: the mount itself is the container's cgroup.
    write(controller, cpu_cfs_quota_us="300000", cpu_cfs_period_us="100000")
    assert cgroup_cpu_quota(tmp_path, "4:cpu,cpuacct:/docker/other") == 3.0


def test_this_process_budget_is_read_from_the_kernel() -> None:
    found = CpuBudget.of_this_process()
    assert found.allowed == frozenset(os.sched_getaffinity(0))
    assert 1 <= found.workers() <= len(found.allowed)


def test_serve_takes_no_default_worker_count_of_its_own_and_refuses_zero() -> None:
    assert parser().parse_args(["serve"]).workers is None  # then KM_WORKERS, then the CPUs
    assert parser().parse_args(["serve", "--workers", "3"]).workers == 3
    with pytest.raises(SystemExit):
        parser().parse_args(["serve", "--workers", "0"])
