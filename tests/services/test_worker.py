"""The worker-thread primitive (keymanager.worker): results, errors, deadlines, loop wake-up, shutdown."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest

from keymanager import worker as worker_module
from keymanager.worker import DeadlineExceeded, Failure, LastOutcome, Worker, serve_each

Job = Callable[[], object]


@pytest.fixture
def worker() -> Iterator[Worker[Job, object]]:
    made: Worker[Job, object] = Worker("test-worker", serve_each)
    yield made
    assert made.close(10)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event a job can wait on to hold the worker thread; always set at the end."""
    event = threading.Event()
    yield event
    event.set()


def _blocker(gate: threading.Event, started: threading.Event) -> Job:
    def block() -> str:
        started.set()
        gate.wait(30)
        return "released"

    return block


def test_results_and_errors_reach_the_caller(worker: Worker[Job, object]) -> None:
    assert worker.call(lambda: threading.current_thread().name, 5) == "test-worker"
    with pytest.raises(ZeroDivisionError):
        worker.call(lambda: 1 / 0, 5)
    # A returned exception object is a result, not an error.
    value = worker.call(lambda: KeyError("x"), 5)
    assert isinstance(value, KeyError)
    assert worker.call(lambda: 42, 5) == 42


def test_a_stuck_job_meets_its_deadline_and_the_next_one_runs_after_it(
    worker: Worker[Job, object], gate: threading.Event
) -> None:
    started = threading.Event()
    stuck = worker.submit(_blocker(gate, started), 30)
    assert started.wait(10)
    before = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        worker.call(lambda: "never", 0.3)
    assert time.monotonic() - before < 5
    assert worker.overdue() == 0.0  # the running job's own deadline (30 s) has not passed
    gate.set()
    assert stuck.result(10) == "released"
    assert worker.call(lambda: "after", 5) == "after"


def test_overdue_tells_how_long_the_running_job_is_past_its_deadline(
    worker: Worker[Job, object], gate: threading.Event
) -> None:
    started = threading.Event()
    with pytest.raises(DeadlineExceeded):
        worker.call(_blocker(gate, started), 0.2)
    assert started.is_set()
    assert worker.overdue() > 0
    gate.set()
    assert worker.call(lambda: "ok", 5) == "ok"
    assert worker.overdue() == 0.0


def test_a_job_expired_in_the_queue_is_never_started(worker: Worker[Job, object], gate: threading.Event) -> None:
    started = threading.Event()
    ran: list[str] = []
    worker.submit(_blocker(gate, started), 30)
    assert started.wait(10)
    with pytest.raises(DeadlineExceeded):
        worker.call(lambda: ran.append("late"), 0.2)
    gate.set()
    assert worker.call(lambda: ran.append("fresh"), 5) is None
    assert ran == ["fresh"]


def test_awaiting_callers_are_woken_with_results_errors_and_deadlines(
    worker: Worker[Job, object], gate: threading.Event
) -> None:
    async def scenario() -> list[object]:
        ok = worker.acall(lambda: threading.current_thread().name, 5)
        failed = worker.acall(lambda: {}["missing"], 5)
        results = list(await asyncio.gather(ok, failed, return_exceptions=True))
        started = threading.Event()
        held = asyncio.ensure_future(worker.acall(_blocker(gate, started), 30))
        assert await asyncio.to_thread(started.wait, 10)
        before = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            await worker.acall(lambda: "never", 0.3)
        results.append(time.monotonic() - before)
        gate.set()
        results.append(await held)
        return results

    name, error, waited, released = asyncio.run(scenario())
    assert name == "test-worker"
    assert isinstance(error, KeyError)
    assert isinstance(waited, float) and waited < 5
    assert released == "released"


def test_batches_are_served_together_with_one_outcome_each(gate: threading.Event) -> None:
    seen: list[list[int]] = []
    serving = threading.Event()

    def serve(jobs: Sequence[int]) -> list[int | Failure]:
        seen.append(list(jobs))
        if 0 in jobs:
            serving.set()
            gate.wait(30)  # hold the thread while the next jobs queue up
        return [job * 2 if job >= 0 else Failure(ValueError(job)) for job in jobs]

    batching: Worker[int, int] = Worker("batch-worker", serve, max_batch=100)
    held = batching.submit(0, 30)
    assert serving.wait(10)  # the first batch is being served
    queued = [batching.submit(n, 30) for n in (-1, *range(1, 20))]
    gate.set()
    assert held.result(10) == 0
    with pytest.raises(ValueError):
        queued[0].result(10)
    assert [future.result(10) for future in queued[1:]] == [n * 2 for n in range(1, 20)]
    assert seen == [[0], [-1, *range(1, 20)]]
    assert batching.close(10)


def test_an_exception_escaping_serve_fails_the_whole_batch() -> None:
    def serve(jobs: Sequence[int]) -> list[int | Failure]:
        raise RuntimeError("store exploded")

    broken: Worker[int, int] = Worker("broken-worker", serve)
    with pytest.raises(RuntimeError, match="store exploded"):
        broken.call(1, 5)
    assert broken.close(10)


def test_close_serves_what_was_queued_then_stops(gate: threading.Event) -> None:
    closing: Worker[Job, object] = Worker("closing-worker", serve_each)
    started = threading.Event()
    held = closing.submit(_blocker(gate, started), 30)
    assert started.wait(10)
    thread = next(t for t in threading.enumerate() if t.name == "closing-worker")
    queued = closing.submit(lambda: "queued", 30)
    assert not closing.close(0.2)  # still held: close stops waiting, the thread goes on
    gate.set()
    assert held.result(10) == "released"
    assert queued.result(10) == "queued"
    thread.join(10)
    assert not thread.is_alive()


def test_last_outcome() -> None:
    outcome = LastOutcome()
    assert not outcome.failing
    outcome.failed()
    outcome.failed()
    assert outcome.failing
    outcome.succeeded()
    assert not outcome.failing


def test_fail_queued_releases_the_waiting_callers_at_once(gate: threading.Event) -> None:
    stuck: Worker[Job, object] = Worker("stuck-worker", serve_each)
    started = threading.Event()
    held = stuck.submit(_blocker(gate, started), 30)
    assert started.wait(10)
    waiting = [stuck.submit(lambda: "never", 30) for _ in range(3)]
    assert not stuck.close(0.1)  # the stop request is queued behind them too
    assert stuck.fail_queued() == 3
    for future in waiting:
        with pytest.raises(DeadlineExceeded):
            future.result(1)
    thread = next(t for t in threading.enumerate() if t.name == "stuck-worker")
    gate.set()
    assert held.result(10) == "released"
    thread.join(10)  # the stop request survived the purge
    assert not thread.is_alive()


def test_a_batch_leaves_out_the_jobs_expired_in_the_queue(gate: threading.Event) -> None:
    seen: list[list[int]] = []
    serving = threading.Event()

    def serve(jobs: Sequence[int]) -> list[int | Failure]:
        seen.append(list(jobs))
        if 0 in jobs:
            serving.set()
            gate.wait(30)
        return list(jobs)

    batching: Worker[int, int] = Worker("expiring-batch-worker", serve, max_batch=100)
    held = batching.submit(0, 30)
    assert serving.wait(10)  # the first batch is being served
    with pytest.raises(DeadlineExceeded):
        batching.call(1, 0.1)  # expires while queued
    kept = batching.submit(2, 30)
    gate.set()
    assert held.result(10) == 0 and kept.result(10) == 2
    assert seen == [[0], [2]]
    assert batching.close(10)


class Clock:
    """A clock that moves only when told (a worker's ``clock``): deadlines pass without waiting for them."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _held_separate_worker(
    gate: threading.Event, name: str, clock: Callable[[], float] = time.monotonic
) -> tuple[Worker[Job, object], threading.Event]:
    """A worker serving separately whose thread is held by a first job until ``gate`` is set."""
    separate: Worker[Job, object] = Worker(name, serve_each, max_batch=100, separately=True, clock=clock)
    started = threading.Event()
    separate.submit(_blocker(gate, started), 30)
    assert started.wait(10)
    return separate, started


def test_a_batch_served_separately_checks_each_deadline_as_the_job_starts(gate: threading.Event) -> None:
    clock = Clock()
    separate, _ = _held_separate_worker(gate, "separate-deadlines", clock)
    second_gate, second_started = threading.Event(), threading.Event()
    ran: list[str] = []
    slow = separate.submit(_blocker(second_gate, second_started), 30)
    late = separate.submit(lambda: ran.append("late"), 0.2)  # taken with the slow one, expires behind it
    kept = separate.submit(lambda: ran.append("kept"), 30)
    gate.set()  # the thread takes the three queued jobs as one batch
    assert second_started.wait(10)
    clock.now += 0.3  # past the late job's deadline, while the slow one still runs
    second_gate.set()
    with pytest.raises(DeadlineExceeded):
        late.result(10)  # failed when its turn came, never started
    assert slow.result(10) == "released" and kept.result(10) is None
    assert ran == ["kept"]
    assert separate.close(10)


def test_fail_queued_also_releases_the_jobs_taken_but_not_started(gate: threading.Event) -> None:
    separate, _ = _held_separate_worker(gate, "separate-stuck")
    second_gate, second_started = threading.Event(), threading.Event()
    stuck = separate.submit(_blocker(second_gate, second_started), 30)
    behind = [separate.submit(lambda: "never", 30) for _ in range(3)]
    gate.set()  # the thread takes the stuck job and the three behind it as one batch
    assert second_started.wait(10)
    assert separate.pending() == 3
    assert separate.fail_queued() == 3
    for future in behind:
        with pytest.raises(DeadlineExceeded):
            future.result(1)
    second_gate.set()
    assert stuck.result(10) == "released"
    assert separate.close(10)


def test_a_batch_served_separately_wakes_an_event_loop_once(
    gate: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "SETTLE_WITHIN", 30.0)  # however slowly this machine runs the batch
    separate, _ = _held_separate_worker(gate, "separate-wake-ups")
    loop = asyncio.new_event_loop()
    wake_ups: list[object] = []
    plain = loop.call_soon_threadsafe

    def counted(callback: Callable[..., object], *args: object) -> asyncio.Handle:
        wake_ups.append(callback)
        return plain(callback, *args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]

    async def scenario() -> list[object]:
        calls = [asyncio.ensure_future(separate.acall(lambda n=n: n, 30)) for n in range(10)]
        await asyncio.sleep(0)  # every job is queued behind the held one
        gate.set()
        return list(await asyncio.gather(*calls))

    try:
        assert loop.run_until_complete(scenario()) == list(range(10))
    finally:
        loop.close()
    assert len(wake_ups) == 1  # ten results, one wake-up
    assert separate.close(10)


def _recording(max_batch: int) -> tuple[Worker[int, int], list[list[int]], list[int]]:
    """A batch worker doubling its jobs; the batches it was given, and each put on its queue."""
    seen: list[list[int]] = []

    def serve(jobs: Sequence[int]) -> list[int | Failure]:
        seen.append(list(jobs))
        return [job * 2 for job in jobs]

    made: Worker[int, int] = Worker("turn-worker", serve, max_batch=max_batch)
    puts: list[int] = []

    class Counted(queue.SimpleQueue):  # type: ignore[type-arg]
        def put(self, item: object, block: bool = True, timeout: float | None = None) -> None:
            puts.append(len(item) if isinstance(item, list) else 1)
            super().put(item, block, timeout)

    made._queue = Counted()
    return made, seen, puts


def test_the_jobs_of_one_loop_turn_reach_the_thread_in_one_hand_over() -> None:
    """Twenty requests awaiting the thread in one turn of the loop wake it once, as one batch — not
    twenty puts on its queue, each a wake-up of an idle thread."""
    turn_worker, seen, puts = _recording(max_batch=100)

    async def scenario() -> list[int]:
        return list(await asyncio.gather(*(turn_worker.acall(n, 30) for n in range(20))))

    assert asyncio.run(scenario()) == [n * 2 for n in range(20)]
    assert puts == [20] and seen == [list(range(20))]
    assert turn_worker.close(10)


def test_a_turn_beyond_max_batch_is_served_in_batches_of_at_most_max_batch() -> None:
    turn_worker, seen, puts = _recording(max_batch=8)

    async def scenario() -> list[int]:
        return list(await asyncio.gather(*(turn_worker.acall(n, 30) for n in range(20))))

    assert asyncio.run(scenario()) == [n * 2 for n in range(20)]
    assert puts == [20] and seen == [list(range(8)), list(range(8, 16)), list(range(16, 20))]
    assert turn_worker.close(10)


def test_a_turn_handed_over_and_not_started_is_released_by_fail_queued(gate: threading.Event) -> None:
    separate, _ = _held_separate_worker(gate, "turn-fail-queued")

    async def scenario() -> list[object]:
        calls = [asyncio.ensure_future(separate.acall(lambda n=n: n, 30)) for n in range(5)]
        await asyncio.sleep(0.05)  # handed over, behind the held job
        started = time.monotonic()
        assert separate.fail_queued() == 5
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert time.monotonic() - started < 5  # at once, not at their deadlines
        return outcomes

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, DeadlineExceeded) for o in outcomes)
    gate.set()
    assert separate.close(10)
