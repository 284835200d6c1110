"""The stream service's body-once rule: a rerun attempt gets the first attempt's outcome, never a second read."""

from __future__ import annotations

import asyncio

import pytest

from keymanager.errors import DecryptionFailed
from keymanager.services.streams import ReadOnce


def test_the_body_is_read_by_the_first_attempt_only() -> None:
    reads: list[int] = []

    async def read() -> int:
        reads.append(len(reads))
        return 42

    once: ReadOnce[int] = ReadOnce()
    assert asyncio.run(once.get(read)) == 42
    assert asyncio.run(once.get(read)) == 42
    assert reads == [0]


def test_a_failed_read_fails_every_attempt_alike() -> None:
    reads: list[int] = []

    async def read() -> int:
        reads.append(1)
        raise DecryptionFailed()

    once: ReadOnce[int] = ReadOnce()
    for _ in range(2):
        with pytest.raises(DecryptionFailed):
            asyncio.run(once.get(read))
    assert reads == [1]
