"""The report's tables, every figure beside its spread over the rounds (``bench.estimate``).

A mean is followed by a ``spread`` column (the lowest to the highest round), which says
``unstable`` when the rounds disagree by more than ``bench.estimate.UNSTABLE`` of their mean.
Seed rows quote the published figures of ``bench.seeds`` in italics, their notes say what the
seed measured, which of our rows is its analogue and, beside every HSM figure compared with
the appliance, ``bench.seeds.SOFTHSM_CAVEAT``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench import seeds, workload
from bench.clients import SMALL_LIMIT, WHERE_AES_RUNS
from bench.consistency import Check
from bench.document import Table, cell
from bench.estimate import UNSTABLE, Estimate
from bench.report import human_size, size_text
from bench.stats import percentile

if TYPE_CHECKING:
    from bench.findings import Results

SPREAD = "spread"
"""The heading of every spread column."""
SPREAD_NOTE = (
    f"{SPREAD}: the lowest to the highest round; 'unstable' where they differ by more than {UNSTABLE:.0%} of "
    "their mean, a figure to measure again rather than to quote."
)
TARGET_TEXT = {
    "km": "REST /encrypt and /decrypt on the CBC+HMAC key; the on-board stream above 64 KiB",
    "km-gcm": "REST /encrypt and /decrypt on an AES-256-GCM key",
    "km-batch": "encrypt_many / decrypt_many, 100 fields per request (figures per field)",
    "km-kms-api": "boto3 Encrypt / Decrypt through keymanager's AWS KMS API door up to 4 KiB; GenerateDataKey + local AES above",  # noqa: E501
    "aws-kms": "the same boto3 code against AWS KMS (or its local emulator)",
    "km-envelope": "the SDK's encrypt_stream: a data key per blob from the service, framed AES-256-GCM locally",
    "km-esdk": "the unmodified AWS Encryption SDK (aws-encryption-sdk) with a key of ours, through the KMS door",
}


def with_spread(figure: Estimate, digits: int) -> list[str]:
    """The mean and its spread cell."""
    return [cell(figure.mean, digits), figure.spread(digits)]


def small_targets(results: Results) -> list[str]:
    """Targets with small-field rows, in the order measured."""
    return list(dict.fromkeys(r.first.target for r in results.rows if r.first.size <= SMALL_LIMIT))


def small_latency_table(results: Results) -> Table:
    """Small fields, one client: mean, spread, p50 and p99 per field of each direction; the seed's row."""
    columns = ["target", "size", "encrypt avg ms", SPREAD, "encrypt p50", "encrypt p99", "decrypt avg ms", SPREAD,
               "decrypt p50", "decrypt p99", "errors"]  # fmt: skip
    rows = []
    for target in small_targets(results):
        for row in results.small(target):
            figures = []
            for which in ("encrypt", "decrypt"):
                pooled = row.latencies(which)
                quantiles = (pooled.p50 * 1e3 / row.first.items, pooled.p99 * 1e3 / row.first.items)
                figures += [*with_spread(row.latency(which), 2), *(cell(q, 2) for q in quantiles)]
            rows.append([target, size_text(row), *figures, cell(row.errors)])
    low, high = seeds.SMALL.latency_ms
    seed = [seeds.SMALL.source, seeds.SMALL.sizes, f"{low:g} to {high:g}", *(["—"] * 8)]
    note = (
        "One client (where each target's AES runs: the next table); avg: the mean over the rounds of each round's "
        "mean latency per field (a batch's divided by its fields); p50, p99: over every round's operations. "
        f"{SPREAD_NOTE} {seed_note(seeds.SMALL)}"
    )
    return Table("Small fields: latency per field, one client", columns, [*rows, seed], note, {len(rows)}, 1)


def small_rate_table(results: Results) -> Table:
    """Small fields: fields per second at every concurrency, each with its spread; the seed's rate."""
    levels = results.plan["concurrency"]
    columns = ["target", "where the AES runs", "size"]
    for c in levels:
        columns += [f"ops/s x{c}", SPREAD]
    rows = []
    for target in small_targets(results):
        for row in results.small(target):
            rates = [results.row(target, row.first.size, c) for c in levels]
            figures = [text for r in rates for text in (with_spread(r.ops, 0) if r else ["—", "—"])]
            errors = cell(sum(r.errors for r in rates if r))
            rows.append([target, WHERE_AES_RUNS[target], size_text(row), *figures, errors])
    columns.append("errors")
    seed = [seeds.SMALL.source, "in the appliance (on board), over its network", seeds.SMALL.sizes,
            f"~{seeds.SMALL.ops_per_s:g}", *(["—"] * (2 * len(levels)))]  # fmt: skip
    note = (
        "Fields encrypted or decrypted per second over the window in which every client was measuring, every "
        f"decryption compared with its input. {SPREAD_NOTE} {seed_note(seeds.SMALL)}"
    )
    return Table("Small fields: fields per second", columns, [*rows, seed], note, {len(rows)})


def seed_note(seed: seeds.SmallSeed | seeds.LargeSeed) -> str:
    """What the italic seed row measured, our analogue, and the SoftHSM caveat."""
    return (
        f"The italic row quotes {seed.source}: {seed.measured}. Our analogue: {seed.analogue}; {seeds.SOFTHSM_CAVEAT}."
    )


def large_table(results: Results) -> Table:
    """Large blobs: encrypt and decrypt time and MB/s per target, with their spread; the seed's row."""
    columns = ["target", "where the AES runs", "size", "encrypt avg s", "encrypt MB/s", SPREAD, "decrypt avg s",
               "decrypt MB/s", SPREAD, "rounds", "errors"]  # fmt: skip
    rows = []
    for target in ("km", "km-envelope", "km-esdk"):
        for row in results.large(target):
            where = "in the HSM (on-board stream)" if target == "km" else WHERE_AES_RUNS[target]
            figures = []
            for which in ("encrypt", "decrypt"):
                figures += [cell(row.latency(which).mean / 1e3, 3), *with_spread(row.mb(which), 1)]
            rows.append([target, where, human_size(row.first.size), *figures, cell(len(row.runs)), cell(row.errors)])
    first, last = seeds.LARGE.first, seeds.LARGE.last
    seed = [seeds.LARGE.source, "in the appliance (on board), over its network",
            f"{human_size(first[0])} to {human_size(last[0])}", f"{first[1]:g} to {last[1]:g}",
            f"~{seeds.LARGE.mb_per_s:g}", *(["—"] * 6)]  # fmt: skip
    note = (
        "One client, memory to memory, every decryption compared with its input; MB/s: the size over the mean "
        f"time of one encryption (or decryption), per round. {SPREAD_NOTE} {seed_note(seeds.LARGE)}"
    )
    return Table("Large blobs", columns, [*rows, seed], note, {len(rows)})


def workload_table(results: Results) -> Table:
    """The workload's transactions/s with their spread, the cost against clear, latency, CPU per party."""
    columns = ["card number", "transactions", "clients", "tx/s", SPREAD, "vs clear", "p50 ms", "p95 ms", "p99 ms",
               "CPU app %", "CPU key manager %", "CPU database %", "errors"]  # fmt: skip
    rows = []
    found = results.workload_rows
    for r in found:
        ordered = sorted(r.latencies)
        rows.append([
            workload.NAMES[r.mode], r.kind, cell(r.concurrency), *with_spread(r.tps, 1), workload.cost(found, r),
            *(cell(percentile(ordered, p) * 1e3, 2) for p in (50.0, 95.0, 99.0)),
            cell(r.cpu_pct("app"), 0), cell(r.cpu_pct("keymanager"), 0), cell(r.cpu_pct("database"), 0),
            cell(r.errors),
        ])  # fmt: skip
    note = (
        f"{results.database}; a read selects {results.plan['app_fields']} random customers, recovers their card "
        "numbers and checks them; a write protects that many card numbers and updates the rows. Rounds interleave "
        f"the ways of storing the card number. vs clear: the change of tx/s against (a), or 'no measurable "
        f"difference' where the two ranges overlap. {SPREAD_NOTE} CPU in % of one core over the window: this "
        "process (the application), the key manager's processes, the database's backends."
    )
    return Table("What encryption costs an application", columns, rows, note)


def seed_application_table() -> Table:
    """The seeds' before/after tables, as published, with what each measured and our analogue."""
    rows = [[s.source, s.what, s.measured, s.analogue, f"{s.before:,g}", f"{s.after:,g}", f"{s.change_pct:+.1f} %"]
            for s in seeds.APPLICATION]  # fmt: skip
    columns = ["source", "figure", "what it measured", "our analogue", "before", "after", "change"]
    note = "Neither seed encrypts per field through a key manager: compare each with its analogue, not with (b)."
    return Table("Published before/after figures (the seeds)", columns, rows, note, set(range(len(rows))), 4)


def consistency_table(checks: Sequence[Check]) -> Table:
    """Every row's throughput beside the throughput its latency gives, and the verdict."""
    rows = [[c.name, cell(c.clients), cell(c.measured, 1), cell(c.from_latency, 1), c.ratio_text(),
             "yes" if c.ok else "NO"] for c in checks]  # fmt: skip
    note = (
        "With every client busy, throughput is clients ÷ mean latency (times the fields of a batch; the mean "
        "weighing each operation as the throughput counts it, one across an edge of the window by its share "
        "inside): a round off that by more than 25 % had clients idle in its window, and fails the run. ratio: "
        "measured ÷ from latency, lowest to highest round."
    )
    columns = ["row", "clients", "measured /s", "clients ÷ mean latency /s", "ratio (rounds)", "agrees"]
    return Table("Throughput against latency, every row", columns, rows, note, text_columns=1)


def targets_table() -> Table:
    """What each target does and where its AES runs."""
    rows = [[name, text, WHERE_AES_RUNS[name]] for name, text in TARGET_TEXT.items()]
    return Table("What was measured", ["target", "what it does", "where the AES runs"], rows, text_columns=3)


def machine(results: Results) -> str:
    """The machine and everything that shares its cores during the run."""
    env = results.environment
    procs = (env.get("load_generator") or {}).get("processes", "—")
    kms = "the KMS emulator (moto), " if results.kms is not None and results.kms.emulated else ""
    return (
        f"{env.get('cpu_model', '—')}, {env.get('logical_cores', '—')} logical cores, shared by the load generator "
        f"({procs} processes and the workload's threads), the key manager ({env.get('service_workers') or '—'} "
        f"workers, SoftHSM inside each), {kms}the workload's database ({results.database}) and whatever else runs "
        "on the machine (the load average below)"
    )


def environment_table(results: Results) -> Table:
    """The machine, the versions, the run's setting."""
    env, plan = results.environment, results.plan
    versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items()))
    before, after = results.load_average
    rows = [
        ["command", results.command],
        ["started (UTC)", time.strftime("%Y-%m-%d %H:%M", time.gmtime(results.started))],
        ["wall time", f"{results.seconds:,.0f} s"],
        ["machine", machine(results)],
        ["load average (1 min) before, after", f"{before[0]:.2f}, {after[0]:.2f}"],
        ["TLS", " ".join(str(v) for v in (env.get("tls") or {}).values()) or "—"],
        ["service", f"{env.get('service_workers') or '—'} workers, SoftHSM, SQLite metadata, audit on"],
        ["workload database", results.database],
        ["AWS KMS side", results.kms.label if results.kms else "—"],
        ["plan", f"{plan['rounds']} rounds of {plan['duration']:g} s after {plan['warmup']:g} s warm-up; "
                 f"clients {', '.join(str(c) for c in plan['concurrency'])}; the workload {plan['rounds']} rounds of "
                 f"{plan['app_duration']:g} s per way and kind"],
        ["versions", versions or "—"],
    ]  # fmt: skip
    return Table("Setting", ["", "value"], [[k, v or "—"] for k, v in rows])
