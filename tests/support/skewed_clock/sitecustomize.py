"""Loaded at start-up by a process whose ``PYTHONPATH`` starts with this directory: its wall clock
(``time.time`` and ``datetime.now``/``utcnow``) runs ``SKEWED_CLOCK_SECONDS`` seconds off, as a
replica's badly set clock would; the monotonic clock is left alone. A fault injected into that
process only, never the system's clock."""

from __future__ import annotations

import datetime as _datetime
import os
import time as _time

_SKEW = float(os.environ.get("SKEWED_CLOCK_SECONDS", "0"))
_real_time = _time.time
_real_time_ns = _time.time_ns


class _SkewedDatetime(_datetime.datetime):
    @classmethod
    def now(cls, tz: _datetime.tzinfo | None = None) -> _SkewedDatetime:  # type: ignore[override]
        return super().now(tz) + _datetime.timedelta(seconds=_SKEW)

    @classmethod
    def utcnow(cls) -> _SkewedDatetime:  # type: ignore[override]
        return super().utcnow() + _datetime.timedelta(seconds=_SKEW)


if _SKEW:
    _time.time = lambda: _real_time() + _SKEW
    _time.time_ns = lambda: _real_time_ns() + int(_SKEW * 1e9)
    _datetime.datetime = _SkewedDatetime  # type: ignore[misc]
