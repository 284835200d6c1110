"""The application workload of a report: its rounds aggregated per way of storing the card number,
what each way costs against the clear one, and the recommendation the run's own numbers give.

A difference within the rounds' spread is printed as ``bench.estimate.NO_DIFFERENCE``, never as a
gain or a loss.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench import consistency
from bench.app import Tps
from bench.estimate import Estimate, change, measurable

MODES = ("plain", "onboard", "batch", "envelope", "token")
"""The ways of storing the card number, in the order the report shows them."""
NAMES = {
    "plain": "(a) card number in clear",
    "onboard": "(b) per-field on-board encryption",
    "batch": "(c) on board, batched per transaction",
    "envelope": "(d) SDK envelope, cached data key",
    "token": "(e) FF1 token",
}
SHORT = {"plain": "(a) clear", "onboard": "(b) per field", "batch": "(c) batched", "envelope": "(d) envelope",
         "token": "(e) FF1 token"}  # fmt: skip
"""The names under the bars."""
DOING = {
    "plain": "in clear",
    "onboard": "encrypted per field on board",
    "batch": "encrypted on board in one batch per transaction",
    "envelope": "under the SDK envelope with a cached data key",
    "token": "as FF1 tokens",
}


@dataclass
class WorkloadRow:
    """The rounds of one (mode, kind, clients) of the workload."""

    runs: list[Tps]

    @property
    def mode(self) -> str:
        return self.runs[0].mode

    @property
    def kind(self) -> str:
        return self.runs[0].kind

    @property
    def concurrency(self) -> int:
        return self.runs[0].concurrency

    @property
    def tps(self) -> Estimate:
        """Transactions per second, per round."""
        return Estimate.of(t.tps for t in self.runs)

    @property
    def latencies(self) -> list[float]:
        """Every round's transaction latencies (seconds)."""
        return [x for t in self.runs for x in t.latencies]

    def cpu_pct(self, party: str) -> float | None:
        """``party``'s CPU in % of one core, mean over the rounds; None when it was not measured."""
        known = [v for v in (t.cpu_pct(party) for t in self.runs) if v is not None]
        return statistics.fmean(known) if known else None

    @property
    def errors(self) -> int:
        """Failed transactions of every round."""
        return sum(sum(t.errors.values()) for t in self.runs)

    def check(self) -> consistency.Check:
        """Transactions per second against clients ÷ mean transaction latency, per round."""
        ratios = tuple(consistency.agreement(t.tps, t.concurrency, 1, t.window_latency) for t in self.runs)
        wanted = statistics.fmean(consistency.expected(t.concurrency, 1, t.window_latency) for t in self.runs)
        name = f"workload {SHORT[self.mode]} {self.kind}s"
        return consistency.Check(name, self.concurrency, self.tps.mean, wanted, ratios)


def workload_rows(workload: Sequence[Tps]) -> list[WorkloadRow]:
    """The rounds grouped per (mode, kind, clients), in the order of ``MODES``, reads before writes."""
    groups: dict[tuple[str, str, int], list[Tps]] = {}
    for t in workload:
        groups.setdefault((t.mode, t.kind, t.concurrency), []).append(t)
    order = {m: i for i, m in enumerate(MODES)}
    keys = sorted(groups, key=lambda k: (k[2], order.get(k[0], len(order)), k[1] != "read"))
    return [WorkloadRow(groups[k]) for k in keys]


def baseline(rows: Sequence[WorkloadRow], row: WorkloadRow) -> WorkloadRow | None:
    """The clear row of the same kind and clients."""
    return next((b for b in rows if (b.mode, b.kind, b.concurrency) == ("plain", row.kind, row.concurrency)), None)


def cost(rows: Sequence[WorkloadRow], row: WorkloadRow) -> str:
    """Transactions/s against the clear row (``-94 %``), or ``no measurable difference``; ``—`` for clear."""
    base = baseline(rows, row)
    return "—" if base is None or base is row else change(row.tps, base.tps)


def find(rows: Sequence[WorkloadRow], mode: str, kind: str) -> WorkloadRow | None:
    """The row of ``mode`` and ``kind`` (the first clients level)."""
    return next((r for r in rows if (r.mode, r.kind) == (mode, kind)), None)


def application_sentence(rows: Sequence[WorkloadRow], database: str, fields: int) -> str:
    """What each way of protecting the card number cost the workload, with the rounds' spread."""
    if not rows:
        return ""
    parts = []
    for kind in ("read", "write"):
        named = []
        for r in (r for r in rows if r.kind == kind):
            extra = "" if r.mode == "plain" else f" ({cost(rows, r)})"
            named.append(f"{r.tps.mean:,.0f} tx/s {DOING[r.mode]}{extra}")
        parts.append(f"{kind}s: " + ", ".join(named))
    return (
        f"In the customer workload on {database} ({rows[0].concurrency} clients, {fields} card numbers per "
        f"transaction, mean of {len(rows[0].runs)} rounds), " + "; ".join(parts) + "."
    )


def recommendation(rows: Sequence[WorkloadRow], fields: int) -> str:
    """Which protection costs what, and which to use for card numbers at what rate: from this run."""
    hsm = [m for m in ("batch", "onboard") if find(rows, m, "read") and find(rows, m, "write")]
    if not hsm or find(rows, "plain", "read") is None:
        return ""

    def changes(mode: str) -> str:
        read, write = find(rows, mode, "read"), find(rows, mode, "write")
        return f"reads {cost(rows, read) if read else '—'}, writes {cost(rows, write) if write else '—'}"

    said = [f"{what}: {changes(mode)}" for mode, what in (
        ("onboard", "a call to the key manager per card number"), ("batch", "one batch call per transaction"),
        ("envelope", "the SDK envelope with a cached data key (a data key in the application's memory)"),
        ("token", "FF1 tokens (worth it only where the stored value must keep a card number's format)"),
    ) if find(rows, mode, "read")]  # fmt: skip
    best = max(hsm, key=lambda m: rows_tps(rows, m, "read"))
    read, write = find(rows, best, "read"), find(rows, best, "write")
    assert read is not None and write is not None
    envelope = find(rows, "envelope", "read")
    beyond = f" ({envelope.tps.mean:,.0f} reads/s here)" if envelope else ""
    shaky = sum(1 for r in rows if r.tps.unstable)
    caution = f" {shaky} of these figures are unstable (see the table): measure again before deciding." if shaky else ""
    return (
        "Recommendation, from this run's numbers — transactions/s against the card number in clear: "
        + "; ".join(said)
        + f". For card numbers, {keep_in_hsm(rows, hsm, best)}: the key stays in the HSM, and this machine then "
        f"served {read.tps.mean:,.0f} read and {write.tps.mean:,.0f} write transactions/s "
        f"({read.tps.mean * fields:,.0f} card numbers/s decrypted) with {read.concurrency} clients. Above that rate "
        "add key-manager replicas (and their cores), or, where a data key in the application's memory is "
        f"acceptable, use the SDK envelope with a cached data key{beyond}.{caution}"
    )


def keep_in_hsm(rows: Sequence[WorkloadRow], hsm: Sequence[str], best: str) -> str:
    """How to call the key manager: the faster of batches and per-field calls for reads, and what the
    other way did where it measured better, or no differently."""
    how = "batch the card numbers of each transaction into one call" if best == "batch" else "call per field"
    if len(hsm) < 2:
        return how
    other = "onboard" if best == "batch" else "batch"
    notes = []
    for kind in ("read", "write"):
        mine, theirs = find(rows, best, kind), find(rows, other, kind)
        if mine is None or theirs is None:
            continue
        differs = measurable(mine.tps, theirs.tps)
        if differs is False:
            notes.append(f"{kind}s: no measurable difference between batches and per-field calls")
        elif differs and theirs.tps.mean > mine.tps.mean:
            notes.append(f"{kind}s did better {DOING[other]} here ({theirs.tps.mean:,.0f} against "
                         f"{mine.tps.mean:,.0f} tx/s)")  # fmt: skip
    return how + (f" ({'; '.join(notes)})" if notes else "")


def rows_tps(rows: Sequence[WorkloadRow], mode: str, kind: str) -> float:
    """Mean transactions/s of ``mode`` and ``kind`` (0 when not measured)."""
    row = find(rows, mode, kind)
    return row.tps.mean if row else 0.0
