"""What a report says: the summary in sentences with numbers, from one run.

Every figure comes from this run's measurements, except the seed rows, which quote the published
figures of ``bench.seeds`` with their source, what they measured and our analogue. Latencies of
small fields are a single client's; a batch's latency is divided by its fields, so that every row
reads per field. Every figure is an ``Estimate`` over the rounds; a comparison whose two ranges
overlap says ``no measurable difference``; an HSM figure compared with the appliance carries
``bench.seeds.SOFTHSM_CAVEAT``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import seeds, workload
from bench.app import Tps
from bench.aws import AwsConfig, network_round_trip_ms
from bench.clients import KMS_DIRECT_LIMIT, SMALL_LIMIT
from bench.consistency import Check, failures, of_measurements, verdict
from bench.estimate import UNSTABLE, Estimate, change
from bench.report import Row, human_size, size_text
from bench.workload import WorkloadRow, workload_rows

SWITCH = "4 KiB (4,096 B)"
"""Where the KMS targets switch from ``Encrypt`` to envelope encryption, as the text names it."""


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
    def workload_rows(self) -> list[WorkloadRow]:
        """The workload's rounds, aggregated per way of storing the card number and kind."""
        return workload_rows(self.workload)

    @property
    def checks(self) -> list[Check]:
        """Throughput against latency, every row."""
        return checks(self)

    @property
    def errors(self) -> int:
        """Failed operations, mismatches and failed transactions of the whole run."""
        return sum(r.errors for r in self.rows) + sum(sum(t.errors.values()) for t in self.workload)

    @property
    def contradictions(self) -> int:
        """Rows whose throughput contradicts their latency."""
        return len(failures(self.checks))

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
        """The setting, the summary and the checks, for ``report.json``."""
        return {
            "ok": self.errors == 0 and self.contradictions == 0,
            "errors_total": self.errors,
            "contradictions": self.contradictions,
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
            "checks": [{**vars(c), "ok": c.ok} for c in self.checks],
            "unstable": unstable_rows(self),
        }


def unstable_rows(results: Results) -> list[str]:
    """Names of the rows whose rounds disagree."""
    named = [f"{r.first.target} {human_size(r.first.size)} x{r.first.concurrency}" for r in results.rows if r.unstable]
    return named + [f"workload {workload.SHORT[r.mode]} {r.kind}s" for r in results.workload_rows if r.tps.unstable]


def checks(results: Results) -> list[Check]:
    """The throughput-against-latency check of every row: blobs, then the workload."""
    found = [of_measurements(f"{r.first.target} {size_text(r)}", r.runs) for r in results.rows]
    return found + [r.check() for r in results.workload_rows]


# -- figures read from the rows ------------------------------------------------------------------
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


def means(figures: Sequence[Estimate], digits: int = 1) -> str:
    """``span`` of the figures' means."""
    return span([f.mean for f in figures], digits)


def top_clients(results: Results) -> int:
    """The most clients small fields were measured with."""
    return max(results.plan["concurrency"])


# -- the summary -----------------------------------------------------------------------------------
def summary(results: Results) -> list[str]:
    """The sentences on top of the report: what a team needs to decide, with this run's numbers."""
    rows = results.workload_rows
    said = [sentence for sentence in (
        workload.recommendation(rows, results.plan["app_fields"]), checks_sentence(results),
        small_sentence(results), seed_small_sentence(results), large_sentence(results),
        stream_or_envelope_sentence(results), door_sentence(results), aws_sentence(results),
        workload.application_sentence(rows, results.database, results.plan["app_fields"]),
        seed_application_sentence(rows),
    ) if sentence]  # fmt: skip
    return said


def checks_sentence(results: Results) -> str:
    """Whether every figure agrees with its latency, and which rows are unstable."""
    text = verdict(results.checks)
    unstable = unstable_rows(results)
    if unstable:
        text += (
            f" {len(unstable)} of {len(results.checks)} rows are unstable (their rounds differ by more than "
            f"{UNSTABLE:.0%} of their mean, "
            f"marked in the tables: measure them again before quoting them): {', '.join(unstable)}."
        )
    return text


def small_sentence(results: Results) -> str:
    """How fast small fields go through the HSM, one client and many, single and in batches."""
    cbc, gcm = results.small("km"), results.small("km-gcm")
    if not cbc:
        return ""
    top = top_clients(results)
    first = cbc[0].first.size
    text = (
        f"Small fields through the HSM: with one client, a {size_span(cbc)} field took "
        f"{means([r.latency('encrypt') for r in cbc])} ms to encrypt and "
        f"{means([r.latency('decrypt') for r in cbc])} ms to decrypt on the CBC+HMAC key (mean)"
    )
    if gcm:
        text += f", {means([r.latency('encrypt') for r in gcm])} ms to encrypt on the GCM key"
    one, many = results.row("km", first, 1), results.row("km", first, top)
    if one and many and top > 1:
        text += (
            f"; at {human_size(first)} one client made {one.ops.mean:,.0f} ops/s and {top} clients "
            f"{many.ops.mean:,.0f} ops/s ({change(many.ops, one.ops)})"
        )
    alone, busy = results.row("km-batch", first, 1), results.row("km-batch", first, top)
    if alone and busy:
        text += (
            f"; batches of {alone.first.items} cost {alone.latency('encrypt').mean:.2f} ms per field with one "
            f"client, and {top} clients moved {busy.ops.mean:,.0f} fields/s"
        )
    return text + "."


def seed_small_sentence(results: Results) -> str:
    """The small-field figures against Townsend's table, framed: a hardware appliance on its network."""
    cbc = results.small("km")
    if not cbc:
        return ""
    low, high = seeds.SMALL.latency_ms
    worst = max(r.latency("encrypt").mean for r in cbc)
    top = top_clients(results)
    best_rate = max((r.ops.mean for r in results.small("km", top)), default=0.0)
    return (
        f"{seeds.SMALL.source} measured {seeds.SMALL.measured}: {low:g} to {high:g} ms per operation and about "
        f"{seeds.SMALL.ops_per_s:g} ops/s for {seeds.SMALL.sizes}. Its analogue here, {seeds.SMALL.analogue}, took "
        f"at most {worst:.1f} ms per encrypt with one client and {top} clients reached {best_rate:,.0f} ops/s — "
        f"{seeds.SOFTHSM_CAVEAT} (two HSM calls per CBC+HMAC field), so these are SoftHSM's figures, not an "
        "appliance's."
    )


def large_sentence(results: Results) -> str:
    """What large blobs ran at, by where the AES runs, against the seed's 6.5 MB/s."""
    stream, envelope, esdk = results.large("km"), results.large("km-envelope"), results.large("km-esdk")
    if not stream:
        return ""
    last = stream[-1]
    text = (
        f"Large blobs ({size_span(stream)}): the on-board stream (AES in SoftHSM) ran at "
        f"{means([r.mb('encrypt') for r in stream], 0)} MB/s to encrypt ({human_size(last.first.size)} in "
        f"{duration(last.latency('encrypt').mean / 1e3)})"
    )
    if envelope:
        text += f", the SDK envelope (AES in the client) at {means([r.mb('encrypt') for r in envelope], 0)} MB/s"
    if esdk:
        text += f", the AWS Encryption SDK through our KMS door at {means([r.mb('encrypt') for r in esdk], 0)} MB/s"
    first, final = seeds.LARGE.first, seeds.LARGE.last
    return text + (
        f"; {seeds.LARGE.source}, {seeds.LARGE.measured}: about {seeds.LARGE.mb_per_s:g} MB/s "
        f"({human_size(first[0])} in {first[1] * 1e3:.0f} ms, {human_size(final[0])} in {final[1]:g} s) — "
        f"{seeds.SOFTHSM_CAVEAT}."
    )


def stream_or_envelope_sentence(results: Results) -> str:
    """When to stream through the HSM and when to use envelope encryption."""
    stream, envelope = results.large("km"), results.large("km-envelope")
    pairs = [(s, e) for s in stream for e in envelope if s.first.size == e.first.size]
    if not pairs:
        return ""
    s, e = pairs[-1]
    size = human_size(s.first.size)
    faster = change(e.mb("encrypt"), s.mb("encrypt"))
    return (
        f"Stream through the HSM when no data key may ever reach the application (a {size} blob then takes "
        f"{duration(s.latency('encrypt').mean / 1e3)} to encrypt, the key manager's CPU doing the AES); use envelope "
        f"encryption when throughput matters: the key manager only makes and wraps the data key, and the client's "
        f"AES at {size} took {duration(e.latency('encrypt').mean / 1e3)} (MB/s against the stream: {faster}); the "
        "service's work per blob stays one data-key call whatever the size."
    )


def door_sentence(results: Results) -> str:
    """What the AWS KMS API door costs against native REST on the same GCM key."""
    size = max((s for s in results.plan["small_sizes"] if s <= KMS_DIRECT_LIMIT), default=None)
    if size is None:
        return ""
    door, native = results.row("km-kms-api", size), results.row("km-gcm", size)
    if not door or not native:
        return ""
    d, n = door.latency("all"), native.latency("all")
    return (
        f"The KMS door (boto3, SigV4, the same GCM key) took {d.mean:.2f} ms per {human_size(size)} Encrypt or "
        f"Decrypt against {n.mean:.2f} ms through the native REST API with the SDK ({change(d, n)} per operation: "
        f"boto3's own client work, SigV4 signing and its check, JSON 1.1); above {SWITCH} both KMS targets switch "
        "to envelope encryption (GenerateDataKey plus local AES), as AWS KMS requires."
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


def seed_application_sentence(rows: Sequence[WorkloadRow]) -> str:
    """The seeds' before/after figures, each beside our analogue (and what it is not comparable with)."""
    aurora = [s for s in seeds.APPLICATION if s.source == seeds.AWS_AURORA]
    cache = [s for s in seeds.APPLICATION if s.source == seeds.AWS_ELASTICACHE]
    ours = [
        f"{kind}s {workload.cost(rows, r)}"
        for kind in ("read", "write")
        if (r := workload.find(rows, "envelope", kind))
    ]
    text = (
        f"For comparison, not like for like: {seeds.AWS_AURORA} measured {seeds.AURORA_MEASURED} ("
        + ", ".join(f"{s.what} {s.before:,g} → {s.after:,g}, {s.change_pct:+.1f} %" for s in aurora)
        + f"); its analogue here is {seeds.AURORA_ANALOGUE}"
        + (f" ({', '.join(ours)})" if ours else "")
        + ", not the per-field rows."
    )
    for s in cache:
        text += (
            f" {s.source} measured {s.measured} ({s.what} {s.before:,g} → {s.after:,g}, {s.change_pct:+.1f} %); "
            f"analogue: {s.analogue}."
        )
    return text
