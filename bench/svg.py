"""Charts as SVG text, drawn here rather than by a plotting library (the bench extra stays small).

A ``Chart`` has a title, axis labels with units, linear or logarithmic axes, and its marks:
lines with markers and an optional low-high band, horizontal reference lines and bands, vertical
markers, and grouped bars with a low-high whisker. Bars stand on a linear axis from zero (a bar's
length is its value; ``Chart.bars`` refuses a log axis). The legend sits under the plot, one entry
a line. ``render`` gives a standalone SVG document (no script, no external font or reference);
every marker and bar carries a ``<title>`` naming its series and point, and the y ticks the class
``tick-y``, so that a reader (or a test) can read the values back from the drawing.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
WIDTH, PLOT_HEIGHT = 900, 420
LEFT, RIGHT, TOP, BOTTOM = 90, 20, 44, 56
LEGEND_LINE = 18


@dataclass
class Axis:
    """One axis: its label, log or linear, its tick positions (None: chosen here) and tick text."""

    label: str
    log: bool = False
    zero: bool = False
    """A linear axis that starts at zero (bars)."""
    ticks: Sequence[float] | None = None
    text: Callable[[float], str] = lambda v: f"{v:,.6g}"
    low: float = math.inf
    high: float = -math.inf

    def include(self, *values: float) -> None:
        """Widen the domain to hold ``values`` (non-finite, and non-positive on a log axis, are left out)."""
        for v in values:
            if math.isfinite(v) and (v > 0 or not self.log):
                self.low, self.high = min(self.low, v), max(self.high, v)

    def domain(self) -> tuple[float, float]:
        """The padded domain (a unit one when nothing was included)."""
        low, high = (self.low, self.high) if self.low <= self.high else (1.0, 10.0)
        if self.log:
            return low / 1.4, high * 1.4
        if self.zero:
            return 0.0, max(high, 0.0) * 1.05 or 1.0
        pad = (high - low) * 0.05 or abs(high) * 0.1 or 1.0
        return low - pad, high + pad

    def fraction(self, value: float) -> float:
        """Where ``value`` sits on the axis, 0 at the low end, 1 at the high end."""
        low, high = self.domain()
        if self.log:
            value = max(value, low)
            return (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low))
        return (value - low) / (high - low)

    def tick_values(self) -> list[float]:
        """The given ticks inside the domain, else 1-2-5 steps (log) or about six even steps (linear)."""
        low, high = self.domain()
        if self.ticks is not None:
            return [t for t in self.ticks if low <= t <= high]
        if self.log:
            found = [m * 10.0**e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
                     for m in (1, 2, 5)]  # fmt: skip
            return [t for t in found if low <= t <= high]
        step = 10 ** math.floor(math.log10((high - low) / 5 or 1))
        for factor in (1, 2, 5, 10):
            if (high - low) / (step * factor) <= 7:
                step *= factor
                break
        return [i * step for i in range(math.ceil(low / step), math.floor(high / step) + 1)]


@dataclass
class Mark:
    """Something drawn: kind ``line``, ``hline``, ``hspan``, ``vline`` or ``bars``."""

    kind: str
    label: str
    points: list[tuple[float, float, float, float]] = field(default_factory=list)
    """(x, y, low, high) for lines; (group index, value, low, high) for bars."""
    names: list[str] = field(default_factory=list)
    """What each point is (its ``<title>``), in the order of ``points``."""
    value: tuple[float, float] = (0.0, 0.0)
    color: str = "#555"


@dataclass
class Chart:
    """A chart with its axes and marks (see the module docstring)."""

    title: str
    x: Axis
    y: Axis
    marks: list[Mark] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    """Category names of a bar chart, left to right."""

    def next_color(self) -> str:
        used = sum(1 for m in self.marks if m.kind in ("line", "bars"))
        return PALETTE[used % len(PALETTE)]

    def line(self, label: str, points: Sequence[tuple[float, float, float, float]]) -> None:
        """A line through (x, mean) with markers and a band from low to high."""
        ordered = sorted(points)
        for x, y, low, high in ordered:
            self.x.include(x)
            self.y.include(y, low, high)
        names = [f"{label}: {self.x.text(x)}" for x, _, _, _ in ordered]
        self.marks.append(Mark("line", label, list(ordered), color=self.next_color(), names=names))

    def hline(self, y: float, label: str) -> None:
        """A dotted horizontal reference line."""
        self.y.include(y)
        self.marks.append(Mark("hline", label, value=(y, y)))

    def hspan(self, low: float, high: float, label: str) -> None:
        """A grey horizontal reference band."""
        self.y.include(low, high)
        self.marks.append(Mark("hspan", label, value=(low, high)))

    def vline(self, x: float, label: str) -> None:
        """A dashed vertical marker."""
        self.marks.append(Mark("vline", label, value=(x, x)))

    def bars(self, label: str, values: Sequence[tuple[float, float, float]]) -> None:
        """One bar per group (``groups``) of (value, low, high), side by side with the other bar series,
        from zero on a linear axis, with a whisker from low to high."""
        if self.y.log:
            raise ValueError("bars stand on a linear axis from zero: a log axis misdraws their lengths")
        self.y.zero = True
        for value, low, high in values:
            self.y.include(0.0, value, low, high)
        points = [(float(i), v, low, high) for i, (v, low, high) in enumerate(values)]
        names = [f"{label}: {group}" for group in self.groups[: len(points)]]
        self.marks.append(Mark("bars", label, points, color=self.next_color(), names=names))


def render(chart: Chart) -> str:
    """The chart as a standalone SVG document."""
    legend = [m for m in chart.marks if m.label]
    height = TOP + PLOT_HEIGHT + BOTTOM + LEGEND_LINE * len(legend) + 12
    w, h = WIDTH - LEFT - RIGHT, PLOT_HEIGHT

    def px(x: float) -> float:
        return LEFT + chart.x.fraction(x) * w

    def py(y: float) -> float:
        return TOP + (1 - chart.y.fraction(y)) * h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="24" text-anchor="middle" font-size="15">{esc(chart.title)}</text>']  # fmt: skip
    out += grid(chart, px, py, w, h)
    bars = [m for m in chart.marks if m.kind == "bars"]
    for mark in chart.marks:
        out += draw(mark, chart, px, py, bars)
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{LEFT + w / 2}" y="{TOP + h + 40}" text-anchor="middle">{esc(chart.x.label)}</text>')
    out.append(
        f'<text transform="translate(20 {TOP + h / 2}) rotate(-90)" text-anchor="middle">{esc(chart.y.label)}</text>'
    )
    for i, mark in enumerate(legend):
        out += legend_entry(mark, TOP + h + BOTTOM + 8 + i * LEGEND_LINE)
    out.append("</svg>")
    return "\n".join(out)


def grid(chart: Chart, px: Callable[[float], float], py: Callable[[float], float], w: float, h: float) -> list[str]:
    """Grid lines and tick labels of both axes (a bar chart's x ticks are its groups)."""
    out = []
    for t in chart.y.tick_values():
        y = py(t)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(
            f'<text class="tick-y" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(chart.y.text(t))}</text>'
        )
    if chart.groups:
        for i, name in enumerate(chart.groups):
            x = LEFT + (i + 0.5) / len(chart.groups) * w
            out.append(f'<text x="{x:.1f}" y="{TOP + h + 18}" text-anchor="middle">{esc(name)}</text>')
        return out
    for t in chart.x.tick_values():
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + h}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + h + 18}" text-anchor="middle">{esc(chart.x.text(t))}</text>')
    return out


def draw(
    mark: Mark, chart: Chart, px: Callable[[float], float], py: Callable[[float], float], bars: list[Mark]
) -> list[str]:
    """The SVG elements of one mark."""
    right = WIDTH - RIGHT
    if mark.kind == "hspan":
        top, bottom = py(mark.value[1]), py(mark.value[0])
        return [rect(LEFT, top, right - LEFT, max(bottom - top, 1), 'fill="#999" fill-opacity="0.3"')]
    if mark.kind == "hline":
        y = py(mark.value[0])
        return [f'<line x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#555" stroke-dasharray="2 3"/>']
    if mark.kind == "vline":
        x = px(mark.value[0])
        bottom = TOP + PLOT_HEIGHT
        return [f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#000" stroke-dasharray="6 4"/>']
    if mark.kind == "bars":
        slot = (right - LEFT) / max(len(chart.groups), 1)
        width = slot * 0.8 / len(bars)
        k = bars.index(mark)
        out = []
        for (i, value, low, high), name in zip(mark.points, mark.names, strict=True):
            x, top, base = LEFT + i * slot + slot * 0.1 + k * width, py(value), py(0.0)
            paint = f'class="mark" fill="{mark.color}"'
            out.append(rect(x, top, width, base - top, paint, name))
            mid = x + width / 2
            out.append(f'<path d="M{mid - 5:.1f} {py(high):.1f}h10M{mid:.1f} {py(high):.1f}V{py(low):.1f}'
                       f'M{mid - 5:.1f} {py(low):.1f}h10" stroke="#222" stroke-width="1.5"/>')  # fmt: skip
        return out
    band = [(px(x), py(high)) for x, _, _, high in mark.points] + [
        (px(x), py(low)) for x, _, low, _ in reversed(mark.points)
    ]
    line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _, _ in mark.points)
    out = [f'<polygon points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in band)}" fill="{mark.color}" fill-opacity="0.18"/>',  # noqa: E501
           f'<polyline points="{line}" fill="none" stroke="{mark.color}" stroke-width="2"/>']  # fmt: skip
    for (x, y, _, _), name in zip(mark.points, mark.names, strict=True):
        circle = f'<circle class="mark" cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{mark.color}">'
        out.append(f"{circle}<title>{esc(name)}</title></circle>")
    return out


def legend_entry(mark: Mark, y: float) -> list[str]:
    """One legend line: the mark's sample and its label."""
    x = LEFT
    if mark.kind in ("line", "bars"):
        sample = f'<rect x="{x}" y="{y - 9}" width="22" height="10" fill="{mark.color}"/>'
    elif mark.kind == "hspan":
        sample = f'<rect x="{x}" y="{y - 9}" width="22" height="10" fill="#999" fill-opacity="0.3"/>'
    else:
        dash = "6 4" if mark.kind == "vline" else "2 3"
        sample = f'<line x1="{x}" y1="{y - 4}" x2="{x + 22}" y2="{y - 4}" stroke="#333" stroke-dasharray="{dash}"/>'
    return [sample, f'<text x="{x + 30}" y="{y}">{esc(mark.label)}</text>']


def rect(x: float, y: float, width: float, height: float, paint: str, title: str = "") -> str:
    """An SVG rectangle (with a ``<title>`` when one is given)."""
    box = f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" {paint}'
    return f"{box}><title>{esc(title)}</title></rect>" if title else f"{box}/>"


def esc(text: str) -> str:
    """Text for SVG."""
    return html.escape(text, quote=True)
