"""serving/memory.py: the worker's allocator keeps large buffers for reuse (glibc, as on every
platform the service is built for: Debian and its container image)."""

from __future__ import annotations

from keymanager.serving.memory import keep_large_buffers


def test_glibc_takes_the_larger_thresholds() -> None:
    assert keep_large_buffers() is True
