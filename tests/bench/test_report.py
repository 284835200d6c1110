"""``python -m bench report`` as a reader gets it: a small quick run against a spawned service and the
KMS emulator, its ``report.html`` opened in headless Chromium (Debian's ``chromium``).

The run is smaller than the user's ``--quick`` (two field sizes, one blob size, clients 1 and 2,
short windows) but reaches every section: small fields of every target, large blobs, the
application workload on PostgreSQL, the seeds. The page must load without a console error, show
every plot, have no empty table and no ``None``/``NaN`` in any cell, and quote the seed rows; its
screenshot is kept at ``var/bench-report.png`` for a person to look at. Never asserts on timings.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench.chromium import Page

pytestmark = pytest.mark.interop  # make test-interop: Chromium rendering the report

ROOT = Path(__file__).resolve().parents[2]
TOWNSEND = "Townsend Security, Alliance Key Manager on-board encryption table (the seed)"
"""``bench.TOWNSEND`` (``bench`` is not importable here: ``tests/bench`` takes its name)."""
SCREENSHOT = ROOT / "var" / "bench-report.png"
SMALLER_THAN_QUICK = [
    "--quick", "--spawn", "--workers", "1", "--small-sizes", "512,5K", "--large-sizes", "1M", "--concurrency", "1,2",
    "--duration", "0.2", "--warmup", "0.05", "--app-duration", "0.3", "--app-rows", "60",
]  # fmt: skip
PAGE = """({
  images: Array.from(document.images).map(i => ({alt: i.alt, shown: i.complete && i.naturalWidth > 0})),
  tables: Array.from(document.querySelectorAll("table")).map(t => ({
    caption: t.caption ? t.caption.textContent : "",
    rows: Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent.trim())),
  })),
  text: document.body.innerText,
  external: Array.from(document.querySelectorAll("[src],[href]"))
    .map(e => e.getAttribute("src") || e.getAttribute("href")).filter(u => !u.startsWith("data:")),
})"""
NOT_A_FIGURE = re.compile(r"\b(nan|none|null|undefined|inf)\b", re.IGNORECASE)


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m bench`` from the checkout, stdout piped (not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The report's directory and the run's stdout."""
    out = tmp_path_factory.mktemp("report")
    done = bench("report", *SMALLER_THAN_QUICK, "--out", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out, done.stdout


@pytest.fixture(scope="module")
def page(run: tuple[Path, str]) -> dict[str, Any]:
    """What Chromium shows of ``report.html``: images, tables, text, errors; the screenshot is kept."""
    shown = Page((run[0] / "report.html").as_uri())
    try:
        found: dict[str, Any] = shown.evaluate(PAGE)
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shown.screenshot(SCREENSHOT)
        found["errors"] = list(shown.errors)
    finally:
        shown.close()
    return found


def table(page: dict[str, Any], caption: str) -> list[list[str]]:
    """The body rows of the table with ``caption``."""
    found = [t["rows"] for t in page["tables"] if t["caption"] == caption]
    assert len(found) == 1, [t["caption"] for t in page["tables"]]
    rows: list[list[str]] = found[0]
    return rows


def test_the_page_loads_without_errors_and_shows_every_plot(page: dict[str, Any]) -> None:
    assert page["errors"] == []
    assert page["external"] == []  # self-contained: nothing fetched
    assert {i["alt"] for i in page["images"]} == {
        "Latency per field",
        "Large-blob throughput",
        "Transactions per second by protection",
    }
    assert all(i["shown"] for i in page["images"]), page["images"]
    assert "No concurrency plot: 2 levels were measured" in page["text"]  # drawn only with 3 levels or more
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_table_is_empty_and_no_cell_says_none_or_nan(page: dict[str, Any]) -> None:
    captions = [t["caption"] for t in page["tables"]]
    assert captions == [
        "Small fields",
        "Large blobs",
        "What encryption costs an application",
        "Published before/after figures (the seeds)",
        "What was measured",
        "Setting",
    ]
    for t in page["tables"]:
        assert t["rows"], t["caption"]
        for row in t["rows"]:
            assert all(row), (t["caption"], row)
            assert not any(NOT_A_FIGURE.search(c) for c in row), (t["caption"], row)


def test_every_target_and_the_seed_rows_are_in_the_tables(page: dict[str, Any]) -> None:
    small = table(page, "Small fields")
    assert {r[0] for r in small} == {"km", "km-gcm", "km-batch", "km-kms-api", "aws-kms", TOWNSEND}
    assert sorted({r[0] for r in small if r[2] == "5 KB (envelope)"}) == ["aws-kms", "km-kms-api"]
    townsend = next(r for r in small if r[0] == TOWNSEND)
    assert townsend[2:4] == ["< 1 KB … 16 KB", "48 to 55"] and "~20" in townsend
    large = table(page, "Large blobs")
    assert {r[0] for r in large} == {"km", "km-envelope", "km-esdk", TOWNSEND}
    assert next(r for r in large if r[0] == TOWNSEND)[5] == "~6.5"
    published = table(page, "Published before/after figures (the seeds)")
    assert [r[2:4] for r in published] == [["1,930", "1,463"], ["1,884", "1,888"], ["162.7", "137.1"]]
    workload = table(page, "What encryption costs an application")
    assert [r[:2] for r in workload][::2] == [
        ["(a) card number in clear", "read"],
        ["(b) per-field on-board encryption", "read"],
        ["(c) SDK envelope, cached data key", "read"],
        ["(d) FF1 token", "read"],
    ]
    assert all(r[9] != "—" for r in workload)  # PostgreSQL's CPU was measured


def test_the_summary_speaks_in_numbers_and_says_what_the_emulator_is(page: dict[str, Any]) -> None:
    text = page["text"]
    assert "QUICK RUN (--quick)" in text
    assert "Small fields through the HSM: with one client" in text
    assert "Stream through the HSM when" in text and "The KMS door (boto3, SigV4" in text
    assert "is not AWS KMS's latency" in text
    assert "In the customer workload on PostgreSQL" in text
    assert f"{TOWNSEND} gives 48 to 55 ms" in text and "1,930 → 1,463" in text


def test_markdown_and_json_beside_the_page(run: tuple[Path, str]) -> None:
    out, stdout = run
    assert re.search(r"^\[1/\d+ \d+ s\] km 512 B x1 round 1/2: ", stdout, re.MULTILINE)  # a line per measurement
    assert stdout.startswith("report: quick run")  # the estimate comes first
    md = (out / "report.md").read_text()
    for name in ("latency-small.svg", "throughput-large.svg", "application.svg"):
        assert f"]({name})" in md and (out / name).read_text().startswith("<svg ")
    document = json.loads((out / "report.json").read_text())
    assert document["ok"] is True and document["quick"] is True and document["database"].startswith("PostgreSQL")
    assert document["summary"] and document["seeds"]["large"]["mb_per_s"] == 6.5
    assert all(m["latencies_ms"]["encrypt"] and m["checked"] > 0 for m in document["measurements"])
    assert all(w["latencies_ms"] and not w["errors"] for w in document["workload"])


def test_help_names_the_defaults_of_the_full_and_the_quick_run() -> None:
    done = bench("report", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "(default 1,8,32; with --quick 1,8)" in text and "(default 3; with --quick 2)" in text
    assert "(default: 100)" in text


def test_a_missing_extra_ends_in_one_line_naming_make_bench() -> None:
    hide = "import runpy, sys; sys.modules['psutil'] = None; sys.argv = ['bench', '--help']; "
    done = subprocess.run(
        [sys.executable, "-c", hide + "runpy.run_module('bench', run_name='__main__')"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "python -m bench: the bench's packages are not installed (psutil): run `make bench` first"
    ]
