"""Deadlines on HSM calls, against the run's SoftHSM token.

Two ways to make a call hang: a real one — another process holds the fcntl lock of the token's
``generation`` file, so SoftHSM's object search waits in ``F_SETLKW`` (no hook in the adapter) —
and a test job that blocks on an event on the HSM thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from keymanager.config import SOFTHSM_MODULE
from keymanager.domain import ciphertext as ct
from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm
from keymanager.errors import HsmUnavailable
from keymanager.hsm import Hsm
from tests.conftest import SOFTHSM_CONF, TEST_PIN
from tests.support.token_lock import token_locked

pytestmark = pytest.mark.softhsm

TIMEOUT = 0.5
SLACK = 1.0
TOKENS = SOFTHSM_CONF.parent / "tokens"


@pytest.fixture
def short(hsm: Hsm, softhsm_token: str) -> Iterator[Hsm]:
    """An adapter with a short deadline on the run's token (sharing the process's HSM thread)."""
    adapter = Hsm(SOFTHSM_MODULE, softhsm_token, TEST_PIN, timeout=TIMEOUT)
    yield adapter
    _drain(adapter)
    adapter.close()
    # A restart finalised the library under the shared adapter too: its next call reopens.
    with contextlib.suppress(HsmUnavailable):
        hsm.ping()
    hsm.ping()


def _drain(adapter: Hsm) -> None:
    """Wait (bounded) until the HSM thread has finished what it was stuck in: jobs run in order."""
    adapter._worker.call(lambda: None, 30)


def _answered_within(call: Any) -> tuple[BaseException | None, float]:
    start = time.monotonic()
    try:
        call()
    except HsmUnavailable as exc:
        return exc, time.monotonic() - start
    return None, time.monotonic() - start


def test_a_hung_softhsm_call_answers_503_by_its_deadline_then_recovers(short: Hsm) -> None:
    short.ping()
    before = short.call(lambda token: token.session())
    with token_locked(TOKENS):
        error, waited = _answered_within(short.ping)
        assert isinstance(error, HsmUnavailable)
        assert TIMEOUT <= waited < TIMEOUT + SLACK
        assert short.outcome.failing
        assert short.stuck_for() > 0
        # Nothing queues behind the stuck call: refused at once.
        error, waited = _answered_within(lambda: short.random(8))
        assert isinstance(error, HsmUnavailable) and waited < SLACK
    _drain(short)
    assert short.stuck_for() == 0
    short.ping()  # recovers by itself, on a new session
    assert short.call(lambda token: token.session()) is not before
    assert not short.outcome.failing


def test_calls_queued_behind_a_stuck_call_are_released_when_it_passes_its_deadline(
    short: Hsm, softhsm_token: str
) -> None:
    patient = Hsm(SOFTHSM_MODULE, softhsm_token, TEST_PIN, timeout=30)  # shares the HSM thread
    gate = threading.Event()
    started = threading.Event()
    outcome: list[BaseException | None] = []

    def hang(token: Any) -> None:
        started.set()
        gate.wait(30)

    stuck = threading.Thread(target=lambda: outcome.append(_answered_within(lambda: short.call(hang))[0]))
    stuck.start()
    try:
        assert started.wait(10)
        error, waited = _answered_within(patient.ping)  # queued behind, with a 30 s deadline of its own
        assert isinstance(error, HsmUnavailable)
        assert waited < TIMEOUT + SLACK
    finally:
        gate.set()
        stuck.join(10)
    assert isinstance(outcome[0], HsmUnavailable)
    _drain(short)
    patient.ping()


def test_an_awaited_call_is_woken_at_its_deadline(short: Hsm) -> None:
    key_id = new_id()
    objects = short.generate_version(key_id, 1, Algorithm.AES_256_GCM)
    head = ct.header(key_id, 1)
    gate = threading.Event()
    started = threading.Event()

    def hang(token: Any) -> None:
        started.set()
        gate.wait(30)

    holder = short._worker.submit(lambda: hang(None), 30)  # a test job holding the HSM thread
    assert started.wait(10)

    async def encrypt() -> tuple[BaseException | None, float]:
        start = time.monotonic()
        try:
            await short.aencrypt(objects, Algorithm.AES_256_GCM, head, b"4111", b"")
        except HsmUnavailable as exc:
            return exc, time.monotonic() - start
        return None, time.monotonic() - start

    try:
        error, waited = asyncio.run(encrypt())
        assert isinstance(error, HsmUnavailable)
        assert TIMEOUT <= waited < TIMEOUT + SLACK
    finally:
        gate.set()
    holder.result(10)
    body = short.encrypt(objects, Algorithm.AES_256_GCM, head, b"4111", b"")
    assert asyncio.run(short.adecrypt(objects, Algorithm.AES_256_GCM, head, body, b"")) == b"4111"
    short.destroy_version(objects)


def test_a_call_expired_in_the_queue_is_never_run(short: Hsm) -> None:
    gate = threading.Event()
    started = threading.Event()
    ran: list[str] = []
    holder = short._worker.submit(lambda: (started.set(), gate.wait(30)), 30)
    assert started.wait(10)
    try:
        with pytest.raises(HsmUnavailable):
            short.call(lambda token: ran.append("late"))
    finally:
        gate.set()
    holder.result(10)
    short.call(lambda token: ran.append("fresh"))
    assert ran == ["fresh"]


def test_errors_and_outcomes(short: Hsm) -> None:
    def fail(token: Any) -> None:
        raise HsmUnavailable()

    with pytest.raises(HsmUnavailable):
        short.call(fail)
    assert short.outcome.failing
    short.ping()
    assert not short.outcome.failing
    with pytest.raises(ZeroDivisionError):  # not an HSM failure: raised as it is
        short.call(lambda token: 1 / 0)
