"""Reading a report's plots back: the SVG documents inlined in ``report.html``, the value of a
drawn position against the tick labels drawn on its axis, the marks by their titles, and whether a
value read from the drawing equals a table cell (used by ``test_report``)."""

from __future__ import annotations

import base64
import itertools
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

SVG = "{http://www.w3.org/2000/svg}"


def number(text: str) -> float:
    """A cell's figure: ``1,234.5`` → 1234.5."""
    return float(text.replace(",", "").split()[0])


def digits_slack(text: str) -> float:
    """Half a unit of a cell's last printed digit (what rounding may have moved it)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10**-decimals


def svgs(run: tuple[Path, str]) -> dict[str, ET.Element]:
    """The page's plots by their alt text, parsed from the data URIs of ``report.html``."""
    page = (run[0] / "report.html").read_text()
    found = re.findall(r'<img alt="([^"]+)" src="data:image/svg\+xml;base64,([^"]+)">', page)
    return {alt: ET.fromstring(base64.b64decode(data)) for alt, data in found}  # noqa: S314 (the run's own SVG)


def axis_reader(svg: ET.Element) -> tuple[bool, Callable[[float], float]]:
    """Whether the y axis is logarithmic (its label says so) and a function from a y position to a value,
    fitted to the y tick labels as drawn."""
    labels = [t.text or "" for t in svg.iter(f"{SVG}text") if "rotate(-90)" in t.get("transform", "")]
    log = "log scale" in labels[0]
    texts = [t for t in svg.iter(f"{SVG}text") if t.get("class") == "tick-y"]
    ticks = [(number(t.text or ""), float(t.get("y", 0)) - 4) for t in texts]
    assert len(ticks) >= 2, ticks
    (v1, y1), (v2, y2) = ticks[0], ticks[-1]
    scale = math.log10 if log else (lambda v: v)
    per_unit = (y2 - y1) / (scale(v2) - scale(v1))
    for (va, ya), (vb, yb) in itertools.pairwise(ticks):  # every tick sits where the axis's scale puts it
        assert abs((yb - ya) - (scale(vb) - scale(va)) * per_unit) <= 0.3, (log, ticks)

    def value(y: float) -> float:
        at = scale(v1) + (y - y1) * (scale(v2) - scale(v1)) / (y2 - y1)
        return 10**at if log else at

    return log, value


def marks(svg: ET.Element) -> dict[str, ET.Element]:
    """Markers and bars by their ``<title>``."""
    return {m.find(f"{SVG}title").text or "": m for m in svg.iter() if m.get("class") == "mark"}  # type: ignore[union-attr]


def close(drawn: float, cell_text: str) -> bool:
    """A value read from the drawing equals the cell, within the cell's rounding and a pixel's worth."""
    return abs(drawn - number(cell_text)) <= digits_slack(cell_text) + 0.01 * abs(number(cell_text))
