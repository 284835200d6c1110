"""Failed authentications per client address: token buckets, a bounded table, summaries per interval."""

from __future__ import annotations

from keymanager.services.throttle import AuthThrottle, FailureSummary


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, **overrides: float) -> AuthThrottle:
    settings = {"rate": 0.5, "burst": 3, "max_addresses": 100, "summary_seconds": 60.0, **overrides}
    return AuthThrottle(
        rate=settings["rate"],
        burst=int(settings["burst"]),
        max_addresses=int(settings["max_addresses"]),
        summary_seconds=settings["summary_seconds"],
        clock=clock,
    )


def test_an_address_may_fail_its_burst_then_waits_for_tokens() -> None:
    clock = Clock()
    limits = throttle(clock)
    for _ in range(3):
        assert limits.retry_after("a") is None
        limits.failed("a")
    assert limits.retry_after("a") == 2  # one token at 0.5 per second
    assert limits.retry_after("b") is None  # another address has its own bucket
    clock.now += 1.0
    assert limits.retry_after("a") == 1
    clock.now += 1.0
    assert limits.retry_after("a") is None
    limits.failed("a")
    assert limits.retry_after("a") == 2
    clock.now += 3600
    for _ in range(3):  # refilled to the burst, never beyond
        limits.failed("a")
    assert limits.retry_after("a") is not None


def test_one_record_per_address_and_interval_sums_up_the_rest() -> None:
    clock = Clock()
    limits = throttle(clock)
    assert limits.failed("a") == FailureSummary("a", 1, 0)  # the first failure is recorded at once
    assert [limits.failed("a") for _ in range(4)] == [None] * 4
    assert [limits.refused("a") for _ in range(2)] == [None] * 2
    assert limits.due() == []  # the interval is not over
    clock.now += 60
    assert limits.due() == [FailureSummary("a", 4, 2)]
    assert limits.due() == []  # nothing more to say
    assert limits.failed("a") is None  # a summary was just written: this one waits for the next
    assert limits.due(everything=True) == [FailureSummary("a", 1, 0)]


def test_the_table_of_addresses_is_bounded_and_evicted_counts_are_kept() -> None:
    clock = Clock()
    limits = throttle(clock, max_addresses=10)
    for number in range(1000):
        limits.failed(f"10.0.{number // 256}.{number % 256}")
        limits.failed(f"10.0.{number // 256}.{number % 256}")
    assert len(limits) == 10
    assert limits.evictions == 990
    summaries = limits.due(everything=True)
    evicted = [s for s in summaries if s.client is None]
    assert evicted == [FailureSummary(None, 990, 0, 990)]  # each had its first failure recorded already
    assert sum(s.failures for s in summaries if s.client is not None) == 10
