"""The argparse types of the bench's options: sizes (``1K``, ``70M``) and comma-separated lists.

Shared by ``bench.cli`` and the subcommands that add their own parsers (``compare``, ``kmip``,
``report``), which import them from here rather than from the command line's module.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib)?\s*$", re.IGNORECASE)
FACTORS = {"": 1, "b": 1, "k": 1_000, "kb": 1_000, "kib": 1024, "m": 1_000_000, "mb": 1_000_000, "mib": 1 << 20}


def parse_size(text: str) -> int:
    """``512``, ``1K`` / ``1KB`` (1,000), ``1KiB`` (1,024), ``70M`` / ``70MB`` (10⁶), ``1MiB`` → bytes."""
    match = SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(float(match.group(1)) * FACTORS[(match.group(2) or "").lower()])


def comma_list(item: Callable[[str], object]) -> Callable[[str], list[object]]:
    """An argparse type for comma-separated lists of ``item``."""

    def parse(text: str) -> list[object]:
        return [item(part) for part in text.split(",") if part.strip()]

    return parse
