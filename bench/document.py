"""A report as blocks (headings, paragraphs, tables, figures) and its two renderings.

``html`` is one self-contained page: the plots inline as base64 SVG images, the style inline, no script
and nothing fetched from the network; it prints on A4 or Letter. ``markdown`` is the same text
with the plots as SVG files beside it. A cell is always text: a figure that is unknown shows as
``—`` (never ``None`` or ``NaN``).
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from pathlib import Path

UNKNOWN = "—"
UNSTABLE = "unstable"
"""A cell that says so is set apart (``bench.estimate``: rounds that disagree)."""
UNSTABLE_CELL = " unstable"


def cell(value: object, digits: int = 1) -> str:
    """A table cell: numbers with thousands separators and ``digits`` decimals, unknown as ``—``."""
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return UNKNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


@dataclass
class Heading:
    """A section title (level 2 under the report's title)."""

    text: str
    level: int = 2


@dataclass
class Paragraph:
    """A paragraph of plain text."""

    text: str
    emphasis: bool = False
    """A notice (the quick mode's, an emulator's): set apart on the page."""


@dataclass
class Table:
    """A captioned table of text cells (see ``cell``), with a note under it."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    reference_rows: set[int] = field(default_factory=set)
    """Rows that quote a published figure rather than a measurement (shown in italics)."""
    text_columns: int = 2
    """Leading columns of words (left-aligned); the others hold figures (right-aligned)."""


@dataclass
class Figure:
    """A plot: its SVG document, its title and the sentence under it."""

    name: str
    """File name of the SVG beside the Markdown (``latency-small.svg``)."""
    svg: bytes
    title: str
    caption: str
    """One sentence saying what to read from the plot."""


Block = Heading | Paragraph | Table | Figure


@dataclass
class Report:
    """A titled sequence of blocks."""

    title: str
    blocks: list[Block]


STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1b1b; max-width: 70rem;
       margin: 1.5rem auto; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ccc; }
p.notice { background: #fff4d6; border-left: 4px solid #d89b00; padding: .5rem .8rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .85rem; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border: 1px solid #ccc; padding: .2rem .45rem; text-align: right; vertical-align: top; }
th.text, td.text { text-align: left; }
td.figure { white-space: nowrap; }
td.unstable { background: #fde2d6; }
thead th { background: #f0f0f0; }
tr.reference td { font-style: italic; background: #f7f7ff; }
p.note { font-size: .85rem; color: #444; margin-top: -.6rem; }
figure { margin: 1rem 0 1.5rem; break-inside: avoid; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: .9rem; color: #333; }
@media print { body { max-width: none; margin: 0; font-size: 11px; } h2 { break-after: avoid; }
               table { break-inside: auto; } tr { break-inside: avoid; } }
"""


def html_page(report: Report) -> str:
    """The whole report as one HTML page with nothing external."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(report.title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(report.title)}</h1>",
    ]
    parts += [html_block(block) for block in report.blocks]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def html_block(block: Block) -> str:
    """One block as HTML."""
    if isinstance(block, Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f'<p class="{"notice" if block.emphasis else "text"}">{html.escape(block.text)}</p>'
    if isinstance(block, Figure):
        data = base64.b64encode(block.svg).decode()
        return (
            f'<figure><img alt="{html.escape(block.title)}" src="data:image/svg+xml;base64,{data}">'
            f"<figcaption><strong>{html.escape(block.title)}.</strong> {html.escape(block.caption)}</figcaption>"
            "</figure>"
        )

    def kind(column: int) -> str:
        return "text" if column < block.text_columns else "figure"

    head = "".join(f'<th class="{kind(j)}">{html.escape(c)}</th>' for j, c in enumerate(block.columns))
    body = []
    for i, row in enumerate(block.rows):
        cells = "".join(f'<td class="{kind(j)}{UNSTABLE_CELL * (UNSTABLE in v)}">{html.escape(v)}</td>'
                        for j, v in enumerate(row))  # fmt: skip
        body.append(f'<tr class="{"reference" if i in block.reference_rows else "measured"}">{cells}</tr>')
    note = f'<p class="note">{html.escape(block.note)}</p>' if block.note else ""
    return (
        f"<table><caption>{html.escape(block.title)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{note}"
    )


def markdown(report: Report, directory: Path) -> str:
    """The report as Markdown; the plots are written to ``directory`` and linked by name."""
    lines = [f"# {report.title}", ""]
    for block in report.blocks:
        lines += [*markdown_block(block, directory), ""]
    return "\n".join(lines)


def markdown_block(block: Block, directory: Path) -> list[str]:
    """One block as Markdown lines."""
    if isinstance(block, Heading):
        return ["#" * block.level + " " + block.text]
    if isinstance(block, Paragraph):
        return [f"> **{block.text}**" if block.emphasis else block.text]
    if isinstance(block, Figure):
        (directory / block.name).write_bytes(block.svg)
        return [f"![{block.title}]({block.name})", "", f"*{block.title}.* {block.caption}"]
    lines = [f"**{block.title}**", "", "| " + " | ".join(block.columns) + " |"]
    lines.append("|" + "|".join("---" if i < block.text_columns else "---:" for i in range(len(block.columns))) + "|")
    for i, row in enumerate(block.rows):
        shown = [f"*{v}*" if i in block.reference_rows and v else v for v in row]
        lines.append("| " + " | ".join(v.replace("|", "\\|") for v in shown) + " |")
    return lines + (["", block.note] if block.note else [])
