"""The report's blocks in their order: notices, the summary, small fields, large blobs, the
application, how it was measured (with the throughput-against-latency check of every row).

Plots and tables are built from the same rows and the same functions (``bench.figures``,
``bench.tables``).
"""

from __future__ import annotations

from bench import figures, tables, workload
from bench.clients import SMALL_LIMIT
from bench.consistency import verdict
from bench.document import Block, Figure, Heading, Paragraph, Report
from bench.estimate import Estimate
from bench.findings import Results, summary
from bench.report import human_size


def report(results: Results) -> Report:
    """The whole report: summary, small blobs, large blobs, the application, the setting."""
    results.summary = summary(results)
    blocks: list[Block] = []
    if results.plan["quick"]:
        blocks.append(Paragraph(quick_notice(results), emphasis=True))
    if results.errors:
        blocks.append(Paragraph(f"THIS RUN HAD {results.errors} ERRORS: its figures are not valid.", emphasis=True))
    checks = results.checks
    if results.contradictions:
        blocks.append(Paragraph(verdict(checks), emphasis=True))
    blocks += [Heading("Summary"), *(Paragraph(s) for s in results.summary)]
    blocks += [Heading("Small fields (< 1 KB to 16 KB)"), tables.small_latency_table(results),
               tables.small_rate_table(results), *small_figures(results)]  # fmt: skip
    blocks += [Heading("Large blobs (1 MB to 70 MB)"), tables.large_table(results), *large_figures(results)]
    blocks += [Heading("What encryption costs an application"), tables.workload_table(results)]
    blocks += [tables.seed_application_table(), *application_figures(results)]
    blocks += [Heading("How it was measured"), tables.targets_table(), tables.consistency_table(checks)]
    blocks.append(tables.environment_table(results))
    return Report("keymanager benchmark: small fields, large blobs, what encryption costs an application", blocks)


def quick_notice(results: Results) -> str:
    """The quick mode's banner."""
    plan = results.plan
    return (
        f"QUICK RUN (--quick): a subset — fields of {', '.join(human_size(s) for s in plan['small_sizes'])}, blobs "
        f"of {', '.join(human_size(s) for s in plan['large_sizes'])}, {plan['rounds']} rounds of "
        f"{plan['duration']:g} s, clients {', '.join(str(c) for c in plan['concurrency'])}. A look, not figures "
        "to pass on: `make bench` writes the full report."
    )


def small_figures(results: Results) -> list[Block]:
    """The latency plot, and the concurrency plot when three or more levels were measured."""
    rows = [r for r in results.rows if r.first.size <= SMALL_LIMIT and r.first.concurrency == 1]
    made: list[Block] = []
    if rows:
        caption = (
            "Each line is one target's mean encrypt latency per field over the rounds (the table's 'encrypt avg ms'), "
            "the band its lowest to highest round; read how far each path sits below the grey seed band (a hardware "
            "appliance on its network; SoftHSM here is in this process), and the jump of the KMS targets past the "
            "dashed 4 KiB line, where they turn to envelope encryption."
        )
        made.append(Figure("latency-small.svg", figures.small_latency(rows), "Latency per field", caption))
    levels = results.plan["concurrency"]
    size = min(results.plan["small_sizes"])
    at = [r for r in results.rows if r.first.size == size]
    if len(levels) >= figures.MIN_CONCURRENCY_LEVELS:
        caption = (
            "Fields per second as clients are added, on linear axes from zero (the table's 'ops/s'; band: lowest to "
            "highest round); a line that flattens has met the machine's cores, not a limit of the key manager "
            "alone, since clients and service share them."
        )
        made.append(Figure("ops-vs-concurrency.svg", figures.concurrency(at), "Fields per second by clients", caption))
    else:
        made.append(Paragraph(
            f"No concurrency plot: {len(levels)} levels were measured ({', '.join(map(str, levels))}); a plot needs "
            f"{figures.MIN_CONCURRENCY_LEVELS} or more (the full run measures 1, 8 and 32). The table gives the rates."
        ))  # fmt: skip
    return made


def large_figures(results: Results) -> list[Block]:
    """The throughput plot of large blobs."""
    rows = [r for r in results.rows if r.first.size > SMALL_LIMIT]
    if not rows:
        return []
    caption = (
        "The table's 'encrypt MB/s' (size over the mean encryption time, band: lowest to highest round). Lines "
        "whose AES runs in the client (envelope, the Encryption SDK) measure the client's AES and framing, the key "
        "manager only wrapping one data key per blob; the on-board stream's line is the key manager's own AES in "
        "SoftHSM. The dotted line is the seed appliance's 6.5 MB/s (hardware on its network)."
    )
    return [Figure("throughput-large.svg", figures.large_throughput(rows), "Large-blob throughput", caption)]


def application_figures(results: Results) -> list[Block]:
    """The workload's bar chart."""
    rows = results.workload_rows
    modes = [m for m in workload.MODES if workload.find(rows, m, "read") and workload.find(rows, m, "write")]
    if not modes:
        return []

    def tps(mode: str, kind: str) -> Estimate:
        found = workload.find(rows, mode, kind)
        assert found is not None
        return found.tps

    svg = figures.application([workload.SHORT[m] for m in modes], [tps(m, "read") for m in modes],
                              [tps(m, "write") for m in modes])  # fmt: skip
    caption = (
        "The table's tx/s as bars on a linear axis from zero (a bar's length is its rate), the whisker the lowest "
        "to highest round. The gap between (a) and each other pair of bars is what that way of protecting the card "
        "number costs this workload; per-field calls pay a round trip to the key manager per card number, a batch "
        "one per transaction, the cached data key only local AES."
    )
    return [Figure("application.svg", svg, "Transactions per second by protection", caption)]
