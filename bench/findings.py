"""What a report says: the summary in sentences with numbers, the tables and the plots, from one run.

Every figure comes from this run's measurements, except the seed rows, which quote the published
figures of ``bench.seeds`` with their source. Latencies of small fields are a single client's;
a batch's latency is divided by its fields, so that every row reads per field.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import figures, seeds
from bench.app import Tps
from bench.aws import AwsConfig, network_round_trip_ms
from bench.clients import KMS_DIRECT_LIMIT, SMALL_LIMIT, WHERE_AES_RUNS
from bench.document import Block, Figure, Heading, Paragraph, Report, Table, cell
from bench.report import Row, human_size
from bench.stats import percentile

SWITCH = "4 KiB (4,096 B)"
"""Where the KMS targets switch from ``Encrypt`` to envelope encryption, as the text names it."""
WORKLOAD_DOING = {
    "plain": "in clear",
    "onboard": "encrypted per field on board",
    "envelope": "under the SDK envelope with a cached data key",
    "token": "as FF1 tokens",
}
WORKLOAD_NAMES = {
    "plain": "(a) card number in clear",
    "onboard": "(b) per-field on-board encryption",
    "envelope": "(c) SDK envelope, cached data key",
    "token": "(d) FF1 token",
}
TARGET_TEXT = {
    "km": "REST /encrypt and /decrypt on the CBC+HMAC key; the on-board stream above 64 KiB",
    "km-gcm": "REST /encrypt and /decrypt on an AES-256-GCM key",
    "km-batch": "encrypt_many / decrypt_many, 100 fields per request (figures per field)",
    "km-kms-api": "boto3 Encrypt / Decrypt through keymanager's AWS KMS API door up to 4 KiB; GenerateDataKey + local AES above",  # noqa: E501
    "aws-kms": "the same boto3 code against AWS KMS (or its local emulator)",
    "km-envelope": "the SDK's encrypt_stream: a data key per blob from the service, framed AES-256-GCM locally",
    "km-esdk": "the unmodified AWS Encryption SDK (aws-encryption-sdk) with a key of ours, through the KMS door",
}


@dataclass
class Results:
    """One report's measurements and setting."""

    plan: dict[str, Any]
    rows: list[Row]
    workload: list[Tps]
    database: str
    environment: dict[str, Any]
    kms: AwsConfig | None
    command: str
    started: float
    seconds: float
    load_average: tuple[tuple[float, float, float], tuple[float, float, float]]
    summary: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Failed operations, mismatches and failed transactions of the whole run."""
        return sum(r.errors for r in self.rows) + sum(sum(t.errors.values()) for t in self.workload)

    def row(self, target: str, size: int, clients: int = 1) -> Row | None:
        """The row of one measurement, if it was made."""
        for r in self.rows:
            if (r.first.target, r.first.size, r.first.concurrency) == (target, size, clients):
                return r
        return None

    def small(self, target: str, clients: int = 1) -> list[Row]:
        """The small-field rows of ``target`` at ``clients``, by size."""
        found = [r for r in self.rows if r.first.target == target and r.first.concurrency == clients]
        return sorted((r for r in found if r.first.size <= SMALL_LIMIT), key=lambda r: r.first.size)

    def large(self, target: str) -> list[Row]:
        """The large-blob rows of ``target``, by size."""
        found = [r for r in self.rows if r.first.target == target and r.first.size > SMALL_LIMIT]
        return sorted(found, key=lambda r: r.first.size)

    def as_json(self) -> dict[str, Any]:
        """The setting and the summary, for ``report.json``."""
        return {
            "ok": self.errors == 0,
            "errors_total": self.errors,
            "quick": self.plan["quick"],
            "plan": self.plan,
            "command": self.command,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": self.seconds,
            "load_average_before_after": self.load_average,
            "database": self.database,
            "environment": self.environment,
            "seeds": {
                "small": vars(seeds.SMALL),
                "large": vars(seeds.LARGE),
                "application": [vars(s) for s in seeds.APPLICATION],
            },
            "summary": self.summary,
        }


# -- figures read from the rows ------------------------------------------------------------------
def per_field_ms(row: Row, which: str) -> float:
    """Mean latency of one field's ``which`` (``encrypt``, ``decrypt``), ms."""
    return row.latencies(which).mean / row.first.items * 1e3


def size_span(rows: Sequence[Row]) -> str:
    """``512 B to 16 KB`` (or the one size)."""
    first, last = human_size(rows[0].first.size), human_size(rows[-1].first.size)
    return first if first == last else f"{first} to {last}"


def duration(seconds: float) -> str:
    """``16 ms`` below a second, ``2.41 s`` from there."""
    return f"{seconds * 1e3:,.0f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def span(values: Sequence[float], digits: int = 1) -> str:
    """``2.1 to 3.4`` (or one figure when they agree at that precision)."""
    low, high = f"{min(values):,.{digits}f}", f"{max(values):,.{digits}f}"
    return low if low == high else f"{low} to {high}"


def top_clients(results: Results) -> int:
    """The most clients small fields were measured with."""
    return max(results.plan["concurrency"])


# -- the summary -----------------------------------------------------------------------------------
def summary(results: Results) -> list[str]:
    """The sentences on top of the report: what a team needs to decide, with this run's numbers."""
    said = [sentence for sentence in (
        small_sentence(results), seed_small_sentence(results), large_sentence(results),
        stream_or_envelope_sentence(results), door_sentence(results), aws_sentence(results),
        application_sentence(results), seed_application_sentence(),
    ) if sentence]  # fmt: skip
    return said


def small_sentence(results: Results) -> str:
    """How fast small fields go through the HSM, one client and many, single and in batches."""
    cbc, gcm = results.small("km"), results.small("km-gcm")
    if not cbc:
        return ""
    top = top_clients(results)
    first = cbc[0].first.size
    text = (
        f"Small fields through the HSM: with one client, a {size_span(cbc)} field took "
        f"{span([per_field_ms(r, 'encrypt') for r in cbc])} ms to encrypt and "
        f"{span([per_field_ms(r, 'decrypt') for r in cbc])} ms to decrypt on the CBC+HMAC key (mean)"
    )
    if gcm:
        text += f", {span([per_field_ms(r, 'encrypt') for r in gcm])} ms to encrypt on the GCM key"
    one, many = results.row("km", first, 1), results.row("km", first, top)
    if one and many and top > 1:
        text += f"; at {human_size(first)} one client made {one.ops_per_s:,.0f} ops/s and {top} clients {many.ops_per_s:,.0f} ops/s"  # noqa: E501
    alone, busy = results.row("km-batch", first, 1), results.row("km-batch", first, top)
    if alone and busy:
        text += (
            f"; batches of {alone.first.items} cost {per_field_ms(alone, 'encrypt'):.2f} ms per field with one "
            f"client, and {top} clients moved {busy.ops_per_s:,.0f} fields/s"
        )
    return text + "."


def seed_small_sentence(results: Results) -> str:
    """The small-field figures against Townsend's table."""
    cbc = results.small("km")
    if not cbc:
        return ""
    low, high = seeds.SMALL.latency_ms
    worst = max(per_field_ms(r, "encrypt") for r in cbc)
    top = top_clients(results)
    best_rate = max((r.ops_per_s for r in results.small("km", top)), default=0.0)
    return (
        f"{seeds.SMALL.source} gives {low:g} to {high:g} ms per operation and about {seeds.SMALL.ops_per_s:g} ops/s "
        f"for {seeds.SMALL.sizes}: this run's slowest single-client on-board encrypt ({worst:.1f} ms) is "
        f"{low / worst:,.0f}x faster, and {top} clients reached {best_rate:,.0f} ops/s "
        f"({best_rate / seeds.SMALL.ops_per_s:,.0f}x the seed's rate)."
    )


def mb_per_s(row: Row, which: str) -> float:
    """Plaintext MB/s of one client doing only ``which`` (size over its mean latency)."""
    mean = row.latencies(which).mean
    return row.first.size / 1e6 / mean if mean else float("nan")


def large_sentence(results: Results) -> str:
    """What large blobs ran at, by where the AES runs, against the seed's 6.5 MB/s."""
    stream, envelope, esdk = results.large("km"), results.large("km-envelope"), results.large("km-esdk")
    if not stream:
        return ""
    last = stream[-1]
    text = (
        f"Large blobs ({size_span(stream)}): the on-board stream "
        f"(AES in the HSM) ran at {span([mb_per_s(r, 'encrypt') for r in stream], 0)} MB/s to encrypt "
        f"({human_size(last.first.size)} in {duration(last.latencies('encrypt').mean)})"
    )
    if envelope:
        text += f", the SDK envelope (AES in the client) at {span([mb_per_s(r, 'encrypt') for r in envelope], 0)} MB/s"
    if esdk:
        text += (
            f", the AWS Encryption SDK through our KMS door at {span([mb_per_s(r, 'encrypt') for r in esdk], 0)} MB/s"
        )
    first, final = seeds.LARGE.first, seeds.LARGE.last
    return text + (
        f"; {seeds.LARGE.source}: about {seeds.LARGE.mb_per_s:g} MB/s "
        f"({human_size(first[0])} in {first[1] * 1e3:.0f} ms, {human_size(final[0])} in {final[1]:g} s)."
    )


def stream_or_envelope_sentence(results: Results) -> str:
    """When to stream through the HSM and when to use envelope encryption."""
    stream, envelope = results.large("km"), results.large("km-envelope")
    pairs = [(s, e) for s in stream for e in envelope if s.first.size == e.first.size]
    if not pairs:
        return ""
    s, e = pairs[-1]
    ratio = mb_per_s(e, "encrypt") / mb_per_s(s, "encrypt")
    return (
        f"Stream through the HSM when no data key may ever reach the application (a {human_size(s.first.size)} blob "
        f"then takes {duration(s.latencies('encrypt').mean)} to encrypt, the key manager's CPU doing the AES); use "
        f"envelope encryption when throughput matters: the key manager only makes and wraps the data key, the "
        f"client's AES ran {ratio:,.1f}x faster at {human_size(s.first.size)} "
        f"({duration(e.latencies('encrypt').mean)}), and the service's work per blob stays one data-key call "
        "whatever the size."
    )


def door_sentence(results: Results) -> str:
    """What the AWS KMS API door costs against native REST on the same GCM key."""
    size = max((s for s in results.plan["small_sizes"] if s <= KMS_DIRECT_LIMIT), default=None)
    if size is None:
        return ""
    door, native = results.row("km-kms-api", size), results.row("km-gcm", size)
    if not door or not native:
        return ""
    d, n = door.latencies("all").mean * 1e3, native.latencies("all").mean * 1e3
    return (
        f"The KMS door (boto3, SigV4, the same GCM key) took {d:.2f} ms per {human_size(size)} Encrypt or Decrypt "
        f"against {n:.2f} ms through the native REST API with the SDK: {d - n:+.2f} ms ({(d / n - 1) * 100:+.0f} %) "
        f"per operation (boto3's own client work, SigV4 signing and its check, JSON 1.1); above {SWITCH} both KMS "
        f"targets switch to envelope encryption (GenerateDataKey plus local AES), as AWS KMS requires."
    )


def aws_sentence(results: Results) -> str:
    """AWS KMS: real (with the network's round trip) or, plainly, an emulator."""
    kms, size = results.kms, min(results.plan["small_sizes"])
    row = results.row("aws-kms", size)
    if kms is None or row is None:
        return ""
    p50 = row.latencies("all").p50 * 1e3
    if kms.emulated:
        return (
            f"AWS KMS was not reached (no credentials given): its rows come from a local emulator ({kms.label}), "
            f"which runs on this machine, does no HSM work and has no network between it and the client. Its "
            f"{p50:.2f} ms p50 per {human_size(size)} operation is not AWS KMS's latency: a real region adds the "
            f"network round trip and its HSM fleet. Run with --aws-region to measure AWS KMS itself."
        )
    try:
        rtt = f"{network_round_trip_ms(kms):.1f} ms"
    except OSError as exc:
        rtt = f"not measured ({type(exc).__name__})"
    return (
        f"AWS KMS ({kms.label}): {p50:.2f} ms p50 per {human_size(size)} Encrypt or Decrypt over the network; "
        f"its round trip (TCP connect to the regional endpoint, median of 5): {rtt}."
    )


def overhead_pct(results: Results, tps: Tps) -> float | None:
    """Transactions/s lost against the clear mode of the same kind, in % (negative: a gain)."""
    base = next((b for b in results.workload if b.mode == "plain" and b.kind == tps.kind), None)
    return None if base is None or not base.tps else (1 - tps.tps / base.tps) * 100


def application_sentence(results: Results) -> str:
    """What each way of protecting the card number cost the workload."""
    if not results.workload:
        return ""
    parts = []
    for kind in ("read", "write"):
        found = [t for t in results.workload if t.kind == kind]
        named = []
        for t in found:
            loss = overhead_pct(results, t)
            extra = "" if t.mode == "plain" or loss is None else f" ({-loss:+.0f} %)"
            named.append(f"{t.tps:,.0f} tx/s {WORKLOAD_DOING[t.mode]}{extra}")
        parts.append(f"{kind}s: " + ", ".join(named))
    clients = results.workload[0].concurrency
    return (
        f"In the customer workload on {results.database} ({clients} clients, {results.plan['app_fields']} card "
        f"numbers per transaction), " + "; ".join(parts) + "."
    )


def seed_application_sentence() -> str:
    """The seeds' before/after figures, quoted with their sources."""
    by_source: dict[str, list[str]] = {}
    for s in seeds.APPLICATION:
        by_source.setdefault(s.source, []).append(f"{s.what} {s.before:,g} → {s.after:,g} ({s.change_pct:+.1f} %)")
    return "For comparison, " + "; ".join(f"{source}: {', '.join(said)}" for source, said in by_source.items()) + "."


# -- tables ----------------------------------------------------------------------------------------
def small_table(results: Results) -> Table:
    """Small fields: latency per field (one client) and fields/s at every concurrency; the seed's row."""
    levels = results.plan["concurrency"]
    columns = ["target", "where the AES runs", "size", "encrypt avg ms", "encrypt p50", "encrypt p99",
               "decrypt avg ms", "decrypt p50", "decrypt p99", *(f"ops/s x{c}" for c in levels), "errors"]  # fmt: skip
    rows = []
    for target in dict.fromkeys(r.first.target for r in results.rows if r.first.size <= SMALL_LIMIT):
        for row in results.small(target):
            items = row.first.items
            enc, dec = row.latencies("encrypt"), row.latencies("decrypt")
            switch = target in ("km-kms-api", "aws-kms")
            size = human_size(row.first.size) + (
                " (envelope)" if switch and row.first.size > KMS_DIRECT_LIMIT else " (direct)" if switch else ""
            )
            rates = [results.row(target, row.first.size, c) for c in levels]
            errors = sum(r.errors for r in rates if r)
            rows.append([
                target, WHERE_AES_RUNS[target], size,
                *(cell(v * 1e3 / items, 2) for v in (enc.mean, enc.p50, enc.p99, dec.mean, dec.p50, dec.p99)),
                *(cell(r.ops_per_s if r else None, 0) for r in rates), cell(errors),
            ])  # fmt: skip
    low, high = seeds.SMALL.latency_ms
    rate = [f"~{seeds.SMALL.ops_per_s:g}", *(["—"] * (len(levels) - 1))]
    seed = [seeds.SMALL.source, "in the appliance (on board)", seeds.SMALL.sizes, f"{low:g} to {high:g}",
            *(["—"] * 5), *rate, "—"]  # fmt: skip
    note = (
        "Latencies: one client, mean, p50 and p99 per field (a batch's latency divided by its fields). "
        "ops/s: fields encrypted or decrypted per second, every decryption compared with its input. "
        f"The italic row quotes {seeds.SMALL.source}."
    )
    return Table("Small fields", columns, [*rows, seed], note, {len(rows)})


def large_table(results: Results) -> Table:
    """Large blobs: encrypt and decrypt time and MB/s per target; the seed's row."""
    columns = ["target", "where the AES runs", "size", "encrypt avg s", "decrypt avg s", "encrypt MB/s",
               "decrypt MB/s", "rounds", "errors"]  # fmt: skip
    rows = []
    for target in ("km", "km-envelope", "km-esdk"):
        for row in results.large(target):
            where = "in the HSM (on-board stream)" if target == "km" else WHERE_AES_RUNS[target]
            rows.append([
                target, where, human_size(row.first.size),
                cell(row.latencies("encrypt").mean, 3), cell(row.latencies("decrypt").mean, 3),
                cell(mb_per_s(row, "encrypt"), 1), cell(mb_per_s(row, "decrypt"), 1), cell(len(row.runs)),
                cell(row.errors),
            ])  # fmt: skip
    first, last = seeds.LARGE.first, seeds.LARGE.last
    seed = [seeds.LARGE.source, "in the appliance (on board)", f"{human_size(first[0])} to {human_size(last[0])}",
            f"{first[1]:g} to {last[1]:g}", "—", f"~{seeds.LARGE.mb_per_s:g}", "—", "—", "—"]  # fmt: skip
    note = "One client, memory to memory, every decryption compared with its input. The italic row quotes the seed."
    return Table("Large blobs", columns, [*rows, seed], note, {len(rows)})


def workload_table(results: Results) -> Table:
    """The workload's transactions/s, latency percentiles, CPU per party and overhead against clear."""
    columns = ["card number", "transactions", "clients", "tx/s", "p50 ms", "p95 ms", "p99 ms", "CPU app %",
               "CPU key manager %", "CPU database %", "tx/s lost vs clear", "errors"]  # fmt: skip
    rows = []
    for t in results.workload:
        ordered = sorted(t.latencies)
        loss = overhead_pct(results, t)
        rows.append([
            WORKLOAD_NAMES[t.mode], t.kind, cell(t.concurrency), cell(t.tps, 1),
            *(cell(percentile(ordered, p) * 1e3, 2) for p in (50.0, 95.0, 99.0)),
            cell(t.cpu_pct("app"), 0), cell(t.cpu_pct("keymanager"), 0), cell(t.cpu_pct("database"), 0),
            "—" if t.mode == "plain" or loss is None else f"{loss:.1f} %", cell(sum(t.errors.values())),
        ])  # fmt: skip
    note = (
        f"{results.database}; a read selects {results.plan['app_fields']} random customers, recovers their card "
        "numbers and checks them; a write protects that many card numbers and updates the rows. CPU in % of one "
        "core over the window: this process (the application), the key manager's processes, the database's backends."
    )
    return Table("What encryption costs an application", columns, rows, note)


def seed_application_table() -> Table:
    """The seeds' before/after tables, as published."""
    rows = [[s.source, s.what, f"{s.before:,g}", f"{s.after:,g}", f"{s.change_pct:+.1f} %"] for s in seeds.APPLICATION]
    return Table("Published before/after figures (the seeds)", ["source", "figure", "before", "after", "change"],
                 rows, "", set(range(len(rows))))  # fmt: skip


def targets_table() -> Table:
    """What each target does and where its AES runs."""
    rows = [[name, text, WHERE_AES_RUNS[name]] for name, text in TARGET_TEXT.items()]
    return Table("What was measured", ["target", "what it does", "where the AES runs"], rows, text_columns=3)


def environment_table(results: Results) -> Table:
    """The machine, the versions, the run's setting."""
    env, plan = results.environment, results.plan
    versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items()))
    before, after = results.load_average
    rows = [
        ["command", results.command],
        ["started (UTC)", time.strftime("%Y-%m-%d %H:%M", time.gmtime(results.started))],
        ["wall time", f"{results.seconds:,.0f} s"],
        ["machine", f"{env.get('cpu_model', '—')}, {env.get('logical_cores', '—')} logical cores"],
        ["load average (1 min) before, after", f"{before[0]:.2f}, {after[0]:.2f}"],
        ["TLS", " ".join(str(v) for v in (env.get("tls") or {}).values()) or "—"],
        ["service", f"{env.get('service_workers') or '—'} workers, SoftHSM, SQLite metadata, audit on"],
        ["workload database", results.database],
        ["AWS KMS side", results.kms.label if results.kms else "—"],
        ["plan", f"{plan['rounds']} rounds of {plan['duration']:g} s after {plan['warmup']:g} s warm-up; "
                 f"clients {', '.join(str(c) for c in plan['concurrency'])}"],
        ["versions", versions or "—"],
    ]  # fmt: skip
    return Table("Setting", ["", "value"], [[k, v or "—"] for k, v in rows])


# -- the report ------------------------------------------------------------------------------------
def report(results: Results) -> Report:
    """The whole report: summary, small blobs, large blobs, the application, the setting."""
    results.summary = summary(results)
    blocks: list[Block] = []
    if results.plan["quick"]:
        blocks.append(Paragraph(quick_notice(results), emphasis=True))
    if results.errors:
        blocks.append(Paragraph(f"THIS RUN HAD {results.errors} ERRORS: its figures are not valid.", emphasis=True))
    blocks += [Heading("Summary"), *(Paragraph(s) for s in results.summary)]
    blocks += [Heading("Small fields (< 1 KB to 16 KB)"), small_table(results), *small_figures(results)]
    blocks += [Heading("Large blobs (1 MB to 70 MB)"), large_table(results), *large_figures(results)]
    blocks += [Heading("What encryption costs an application"), workload_table(results), seed_application_table()]
    blocks += application_figures(results)
    blocks += [Heading("How it was measured"), targets_table(), environment_table(results)]
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
            "Each line is one target's mean over the rounds, the band its lowest to highest round; read how far "
            "each path sits below the grey seed band, and the jump of the KMS targets past the dashed 4 KiB line, "
            "where they turn to envelope encryption."
        )
        made.append(Figure("latency-small.svg", figures.small_latency(rows), "Latency per field", caption))
    levels = results.plan["concurrency"]
    size = min(results.plan["small_sizes"])
    at = [r for r in results.rows if r.first.size == size]
    if len(levels) >= figures.MIN_CONCURRENCY_LEVELS:
        caption = (
            "Fields per second as clients are added (band: lowest to highest round); a line that flattens has met "
            "the machine's cores, not a limit of the key manager alone, since clients and service share them."
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
        "Lines whose AES runs in the client (envelope, the Encryption SDK) measure the client's AES and framing, "
        "the key manager only wrapping one data key per blob; the on-board stream's line is the key manager's "
        "own AES. The dotted line is the seed appliance's 6.5 MB/s."
    )
    return [Figure("throughput-large.svg", figures.large_throughput(rows), "Large-blob throughput", caption)]


def application_figures(results: Results) -> list[Block]:
    """The workload's bar chart."""
    modes = [m for m in WORKLOAD_NAMES if any(t.mode == m for t in results.workload)]
    if not modes:
        return []

    def tps(mode: str, kind: str) -> float:
        return next((t.tps for t in results.workload if t.mode == mode and t.kind == kind), 0.0)

    svg = figures.application([WORKLOAD_NAMES[m] for m in modes], [tps(m, "read") for m in modes],
                              [tps(m, "write") for m in modes])  # fmt: skip
    caption = (
        "The gap between (a) and each other pair of bars is what that way of protecting the card number costs "
        "this workload; per-field calls pay a round trip to the key manager per card number, the cached data key "
        "only local AES."
    )
    return [Figure("application.svg", svg, "Transactions per second by protection", caption)]
