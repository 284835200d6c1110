"""The parts of the bench's figures that need no service: the window of a measurement, the spread of
rounds, the throughput-against-latency check and the drawing of bars. Run in a subprocess from the
checkout (here ``bench`` is this test package), each on figures made up to show one rule."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    """What ``code`` prints, run from the checkout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_window_starts_when_every_client_is_measuring_and_ends_at_the_first_last_answer() -> None:
    out = run("""
        from bench.measure import common_window, inside, shares_inside
        # client A measures from 0 to 10, client B, whose set-up was slow, from 4 to 12
        print(common_window([(0.0, 10.0), (4.0, 12.0)]))
        ops = [(3.0, 5.0), (5.0, 9.0), (9.0, 11.0), (0.0, 2.0)]
        print(inside(ops, 4.0, 10.0), shares_inside(ops, 4.0, 10.0))
        print(common_window([(0.0, 1.0), (2.0, 3.0)]))  # no overlap: the span of them all
    """).splitlines()
    assert out == ["(4.0, 10.0)", "[(3.0, 5.0), (5.0, 9.0), (9.0, 11.0)] [0.5, 1.0, 0.5, 0.0]", "(0.0, 3.0)"]


def test_rounds_that_disagree_are_unstable_and_overlapping_ranges_make_no_measurable_difference() -> None:
    out = run("""
        from bench.estimate import Estimate, change
        print(Estimate.of([204.0, 5.0]).spread(1), "|", Estimate.of([100.0, 120.0]).spread(0))
        print(Estimate.of([7.0]).spread(1), "|", change(Estimate.of([117.0, 121.0]), Estimate.of([100.0, 118.0])))
        print(change(Estimate.of([6.0, 7.0]), Estimate.of([100.0, 118.0])))
    """).splitlines()
    assert out == ["5.0 to 204.0 unstable | 100 to 120", "one round | no measurable difference", "-94 %"]


def test_a_throughput_that_contradicts_its_latency_fails_the_check() -> None:
    out = run("""
        from bench.consistency import of_measurements, verdict
        from bench.measure import Measurement
        def measured(elapsed, ops):  # 8 clients, 10 ms per operation: 800 ops/s when always busy
            return Measurement("km-kms-api", "", 512, 8, "both", 0, 1, elapsed, [0.01] * ops, [], {}, ops, 0.0, 2, None)
        good, bad = of_measurements("good", [measured(1.0, 790)]), of_measurements("bad", [measured(2.6, 160)])
        print(good.ok, good.ratio_text(), bad.ok, bad.ratio_text())
        print(verdict([good, bad]))
    """).splitlines()
    assert out[0] == "True 0.99 False 0.08"
    assert out[1].startswith("THROUGHPUT CONTRADICTS LATENCY in 1 of 2 rows") and "bad x8 (0.08)" in out[1]


def test_bars_stand_on_a_linear_axis_from_zero_and_refuse_a_log_axis() -> None:
    out = run("""
        import re
        from bench.svg import Axis, Chart, render
        chart = Chart("t", Axis("x"), Axis("y"), groups=["a", "b"])
        chart.bars("s", [(100.0, 90.0, 110.0), (6.0, 5.0, 7.0)])
        svg = render(chart)
        tops = re.findall(r'<rect x="[\\d.]+" y="([\\d.]+)" width="[\\d.]+" height="([\\d.]+)" class="mark"', svg)
        bottoms = {round(float(y) + float(h), 1) for y, h in tops}
        ratio = float(tops[1][1]) / float(tops[0][1])
        print(len(tops), len(bottoms), round(ratio, 3), ">0</text>" in svg)
        try:
            Chart("t", Axis("x"), Axis("y", log=True), groups=["a"]).bars("s", [(1.0, 1.0, 1.0)])
        except ValueError as exc:
            print("refused:", exc)
    """).splitlines()
    assert out[0] == "2 1 0.06 True"  # one baseline (zero, labelled), lengths in proportion to the values
    assert out[1].startswith("refused: bars stand on a linear axis from zero")
