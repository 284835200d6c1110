"""A figure measured in rounds: the mean the tables and plots show, the spread beside it, and
whether two figures differ by more than their spread.

Every step of a report is measured in rounds, interleaved (every step once, then again), so the
rounds of one figure see the machine at different moments. ``Estimate`` keeps the figure of every
round. Its mean is what is printed and drawn; its range (lowest to highest round) is printed
beside it and drawn as a band or whisker. Rounds whose range exceeds ``UNSTABLE`` of their mean
make the figure *unstable*: the table says so instead of averaging them silently. Two figures
differ measurably only when their ranges do not overlap; otherwise the report prints
``NO_DIFFERENCE``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

UNSTABLE = 0.5
"""Rounds whose highest and lowest figures differ by more than this share of their mean disagree."""
NO_DIFFERENCE = "no measurable difference"


@dataclass(frozen=True)
class Estimate:
    """The figures of a row's rounds (NaN for a round that measured nothing)."""

    rounds: tuple[float, ...]

    @classmethod
    def of(cls, values: Iterable[float]) -> Estimate:
        """The estimate of these rounds' figures."""
        return cls(tuple(values))

    @property
    def known(self) -> tuple[float, ...]:
        """The rounds' figures that are numbers."""
        return tuple(v for v in self.rounds if math.isfinite(v))

    @property
    def mean(self) -> float:
        """Mean over the rounds (NaN when none measured)."""
        return statistics.fmean(self.known) if self.known else math.nan

    @property
    def low(self) -> float:
        """The lowest round (NaN when none measured)."""
        return min(self.known, default=math.nan)

    @property
    def high(self) -> float:
        """The highest round (NaN when none measured)."""
        return max(self.known, default=math.nan)

    @property
    def spread_known(self) -> bool:
        """True with two rounds or more: only then is there a spread to print."""
        return len(self.known) >= 2

    @property
    def unstable(self) -> bool:
        """True when the rounds disagree by more than ``UNSTABLE`` of their mean."""
        mean = self.mean
        return self.spread_known and mean > 0 and (self.high - self.low) / mean > UNSTABLE

    def spread(self, digits: int = 1) -> str:
        """``low to high`` of the rounds, ``… unstable`` when they disagree, ``one round`` without a spread."""
        if not self.known:
            return "—"
        if not self.spread_known:
            return "one round"
        text = f"{self.low:,.{digits}f} to {self.high:,.{digits}f}"
        return f"{text} unstable" if self.unstable else text


def measurable(a: Estimate, b: Estimate) -> bool | None:
    """True when the ranges of ``a`` and ``b`` do not overlap, False when they do; None when either
    has fewer than two rounds (no spread to judge by)."""
    if not (a.spread_known and b.spread_known):
        return None
    return a.high < b.low or b.high < a.low


def change(new: Estimate, base: Estimate) -> str:
    """``new`` against ``base`` in % (``-94 %``), ``NO_DIFFERENCE`` when their ranges overlap, and
    ``(one round)`` after the figure when that cannot be judged."""
    if not (new.known and base.known) or not base.mean:
        return "—"
    text = f"{(new.mean / base.mean - 1) * 100:+.0f} %"
    differs = measurable(new, base)
    if differs is False:
        return NO_DIFFERENCE
    return text if differs else f"{text} (one round)"
