"""``python -m bench targets``: the performance targets (issue 14), each as a fraction of a ceiling of
this machine measured in the same run, with a verdict.

The ceilings (``bench.ceilings``: raw ASGI and FastAPI HTTPS echo driven by wrk, SoftHSM per
operation in one process per core, ``cryptography`` AES-GCM on one core) are measured at the
start and at the end of the run; each target is judged against the **mean of the two** (both are
in the JSON; ``--fast`` measures them once, at the start). Targets and their denominators:

| target | measured as | ceiling | goal |
|---|---|---|---|
| 1 KB encrypt, decrypt x32 | ``km``, wrk, 32 connections, req/s | raw ASGI echo req/s | ≥ 45 % |
| service CPU per 1 KB encrypt | same run, CPU of all service processes / request | raw echo's | ≤ 2.5x |
| batches of 100 x 1 KB | ``km-batch`` encrypt, 8 clients (CBC+HMAC; GCM key) | SoftHSM pair (GCM), all cores | ≥ 60 % |
| on-board stream 70 MB | ``km`` stream, one client, encrypt and decrypt | SoftHSM chunked CBC, one process | ≥ 25 % |
| SDK envelope 70 MB | ``km-envelope``, one client, MB/s | cryptography AES-GCM, one core | ≥ 70 % |
| KMS API vs the emulator | wrk replaying one signed ``Encrypt``, 32 connections | the emulator's ops/s | ≥ 10x |
| KMS API CPU per request | same wrk run against us | native REST encrypt, same key, wrk | ≤ 1.3x |
| KMIP Encrypt x32 | one TTLV ``Encrypt`` replayed (asyncio, mTLS), 32 connections | native REST, same driver | ≥ 80 % |
| KMIP CPU per request | same runs | native REST's, same driver | ≤ 1.2x |
| XKS Encrypt p99 at 1,800/s | open loop (``bench.xks``): a signed ``Encrypt`` on a schedule | absolute | ≤ 35 ms |
| XKS Encrypt rate, p99 ≤ 35 ms | the highest open-loop rate whose p99 is within 35 ms | AWS's quota, 1,800/s | ≥ 1x |
| sequential encrypt p50, p99 | SDK, one client | absolute | ≤ 1.5 ms, ≤ 4 ms |
| re-encrypt, data key, MAC p50 | SDK, one client | absolute | ≤ 1.5 ms |
| peak RSS per worker | during the 70 MB stream | absolute | ≤ 150 MB |
| sign x32: RSA-2048 PSS, ECDSA P-256 | native ``/sign``, KMS ``Sign``; wrk, 1 KB | SoftHSM sign, all cores | ≥ 60 % |

Beside the table (``bench.signing``): ``verify``, ``get_public_key`` and ``derive_shared_secret``
p50 through the SDK, one client, and the service CPU per native sign over the raw echo's. A KMS
door that does not answer ``Sign`` leaves its rows unmeasured ("?"), naming what it answered.

For absolute targets the fraction is goal / measured (≥ 100 % when met).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from keymanager_sdk import KeyManager
from rich.console import Console
from rich.table import Table

from bench import ceilings, kmip, kmsdoor, output, sequential, signing, transit, xks
from bench.measure import MB, Measurement, Window, measure
from bench.report import human_size, write_json
from bench.rig import Rig, rig
from bench.stats import Distribution
from bench.wrk import measure_wrk

BATCH_CONCURRENCY = 8
COMBINED = "mean of the ceilings measured at the start and at the end of the run"
MEASURED_ONCE = "--fast: the ceilings measured once, at the start (start, end and used are that measurement)"
FAST = {"stream_size": 1_000_000, "duration": 0.5, "warmup": 0.2, "hsm_seconds": 0.1, "high_concurrency": 4}
"""``--fast``: tiny sizes, the shortest windows (wrk's one second, no wrk warm-up below 0.5 s) and the
ceilings measured once, at the start (smoke tests, a quick look); its figures judge nothing."""


@dataclass(frozen=True)
class Goal:
    """One target: the figure measured, its ceiling (None: an absolute target), the goal and its kind.

    ``kind``: ``share`` (measured / ceiling ≥ goal), ``at_least`` and ``at_most`` (measured / ceiling
    as a multiple, ≥ or ≤ goal) or ``absolute`` (measured ≤ goal; fraction = goal / measured).
    """

    name: str
    measured: float | None
    unit: str
    ceiling: float | None
    ceiling_name: str
    goal: float
    kind: str
    ceiling_start: float | None = None
    ceiling_end: float | None = None

    @property
    def fraction(self) -> float | None:
        """measured / ceiling, or goal / measured for absolute targets; None when unknown."""
        if not self.measured:
            return None
        if self.kind == "absolute":
            return self.goal / self.measured
        return self.measured / self.ceiling if self.ceiling else None

    @property
    def met(self) -> bool | None:
        """The verdict; None when the figure could not be measured."""
        fraction = self.fraction
        if fraction is None:
            return None
        if self.kind == "at_most":
            return fraction <= self.goal
        return fraction >= (1.0 if self.kind == "absolute" else self.goal)

    def as_json(self) -> dict[str, Any]:
        """For the report."""
        return {**self.__dict__, "fraction": self.fraction, "met": self.met}


# -- ceilings ----------------------------------------------------------------------------------
def measure_ceilings(args: argparse.Namespace, step: Callable[[str], None]) -> dict[str, Any]:
    """``bench.ceilings`` with the service's workers and the targets' connections and windows."""
    settings = argparse.Namespace(
        workers=args.workers,
        connections=args.high_concurrency,
        duration=args.duration,
        warmup=args.warmup,
        hsm_seconds=args.hsm_seconds,
    )
    return ceilings.measure(settings, step)


def mean_of(start: Any, end: Any) -> Any:
    """The mean of two ceilings documents, figure by figure."""
    if isinstance(start, dict):
        return {k: mean_of(v, end[k]) for k, v in start.items()}
    return (start + end) / 2 if isinstance(start, int | float) else start


class Ceilings:
    """The start, end and combined ceilings; ``of(path)`` gives a figure of each."""

    def __init__(self, start: dict[str, Any], end: dict[str, Any], combined_as: str = COMBINED) -> None:
        self.start, self.end, self.used = start, end, mean_of(start, end)
        self.combined_as = combined_as

    def of(self, *path: str) -> tuple[float, float, float]:
        """(used, start, end) of the figure at ``path``."""
        figures = []
        for document in (self.used, self.start, self.end):
            for part in path:
                document = document[part]
            figures.append(float(document))
        return figures[0], figures[1], figures[2]

    def as_json(self) -> dict[str, Any]:
        return {"combined_as": self.combined_as, "used": self.used, "start": self.start, "end": self.end}


# -- measurements ------------------------------------------------------------------------------
def window_of(args: argparse.Namespace, warmup: float | None = None) -> Window:
    """The measurement window of the arguments."""
    duration = None if args.requests else args.duration
    return Window(args.warmup if warmup is None else warmup, duration, args.requests)


def field_run(r: Rig, args: argparse.Namespace, target: str, mode: str, concurrency: int) -> Measurement:
    """A small-field measurement: wrk for ``km`` at more than one connection, Python clients otherwise."""
    if target == "km" and concurrency > 1:
        assert r.endpoint is not None
        label = r.target(target).label
        return measure_wrk(r.endpoint, label, args.field_size, concurrency, window_of(args), r.probe, mode=mode)
    return measure(r.pool, r.target(target), args.field_size, concurrency, mode, window_of(args), r.probe_of(target))


def gcm_batch(r: Rig, args: argparse.Namespace) -> Measurement:
    """Batches on the KMS door's ``AES_256_GCM`` key."""
    assert r.endpoint is not None and r.door is not None
    spec = replace(r.target("km-batch"), endpoint=replace(r.endpoint, key=r.door.key_id), label="km-batch, GCM key")
    return measure(r.pool, spec, args.field_size, BATCH_CONCURRENCY, "encrypt", window_of(args), r.probe)


def stream_run(r: Rig, args: argparse.Namespace, target: str) -> Measurement:
    """One client streaming ``--stream-size`` blobs (encrypt, then decrypt and compare)."""
    return measure(r.pool, r.target(target), args.stream_size, 1, "both", window_of(args, 0.0), r.probe)


def sequential_runs(r: Rig, args: argparse.Namespace, km: KeyManager) -> dict[str, Callable[[], Measurement]]:
    """Re-encryption, data key and MAC, one SDK client (``km``) in this process."""
    assert r.service is not None and r.endpoint is not None
    mac = sequential.mac_endpoint(r.service, r.endpoint)
    calls = sequential.calls(km, r.endpoint, mac.key, args.field_size)
    window = window_of(args)
    return {
        f"{name}_sequential": (
            lambda name=name: sequential.measure_sequential(name, calls[name], args.field_size, window, r.probe)
        )
        for name in sequential.OPERATIONS
    }


def door_runs(r: Rig, args: argparse.Namespace) -> dict[str, Callable[[], Measurement]]:
    """Native REST against the KMS door, and the KMS door against the emulator: wrk, one plaintext."""
    assert r.endpoint is not None and r.door is not None and r.aws is not None
    plaintext, high, window = os.urandom(args.field_size), args.high_concurrency, window_of(args)
    door, emulator = r.door, r.aws
    return {
        "rest_gcm_high": lambda: kmsdoor.rest_encrypt_wrk(r.endpoint, door.key_id, plaintext, high, window, r.probe),
        "transit_high": lambda: transit.transit_encrypt_wrk(r.endpoint, door.key_id, plaintext, high, window, r.probe),
        "kms_api_high": lambda: kmsdoor.kms_encrypt_wrk(door, plaintext, high, window, r.probe, "km-kms-api"),
        "emulator_high": lambda: kmsdoor.kms_encrypt_wrk(
            emulator, plaintext, high, window, r.emulator_probe, "aws-kms (emulator)"
        ),
        "kms_api_boto3_sequential": lambda: field_run(r, args, "km-kms-api", "encrypt", 1),
        "emulator_boto3_sequential": lambda: field_run(r, args, "aws-kms", "encrypt", 1),
        **xks_runs(r, args),
        **kmip_runs(r, args),
    }


def xks_runs(r: Rig, args: argparse.Namespace) -> dict[str, Callable[[], Measurement]]:
    """The XKS door (``bench.xks``), open loop: at AWS's quota, then the highest rate within p99 35 ms."""
    assert r.service is not None
    search = xks.RateSearch(xks.provision(r.service), window_of(args), r.probe)
    return {"xks_open_loop_quota": search.at_quota, "xks_open_loop_highest": search.highest}


def kmip_runs(r: Rig, args: argparse.Namespace) -> dict[str, Callable[[], Measurement]]:
    """The KMIP door against native REST encrypt (``bench.kmip``): one asyncio driver replaying one
    request of each, rounds interleaved; none against ``--url`` (its principal's certificate comes
    from a spawned service's development CA)."""
    if r.service is None or r.service.kmip_port is None or r.endpoint is None:
        return {}
    client = kmip.provision(r.service)
    replays = kmip.kmip_replay(client, args.field_size), kmip.rest_replay(r.endpoint, args.field_size)
    return kmip.interleaved(*replays, args.high_concurrency, window_of(args), r.probe)


def measurements(
    r: Rig, args: argparse.Namespace, step: Callable[[str], None]
) -> tuple[dict[str, Measurement], signing.SignRuns]:
    """Every measurement the targets need, named; the sign rows and SDK latencies of asymmetric keys."""
    high = args.high_concurrency
    assert r.endpoint is not None
    km = r.endpoint.client()
    plan: dict[str, Callable[[], Measurement]] = {
        "encrypt_high": lambda: field_run(r, args, "km", "encrypt", high),
        "decrypt_high": lambda: field_run(r, args, "km", "decrypt", high),
        "encrypt_sequential": lambda: field_run(r, args, "km", "encrypt", 1),
        **sequential_runs(r, args, km),
        "batch": lambda: field_run(r, args, "km-batch", "encrypt", BATCH_CONCURRENCY),
        "batch_gcm": lambda: gcm_batch(r, args),
        "stream": lambda: stream_run(r, args, "km"),
        "envelope": lambda: stream_run(r, args, "km-envelope"),
        **door_runs(r, args),
    }
    done = {}
    with km:
        for name, run_one in plan.items():
            step(name)
            done[name] = run_one()
    step("asymmetric keys: sign, verify, public key, ECDH")
    assert r.service is not None and r.door is not None
    signs = signing.measure_all(r.service, r.endpoint, r.door, high, window_of(args), r.probe)
    done.update(signs.measurements)
    return done, signs


# -- verdicts ----------------------------------------------------------------------------------
def mb_per_s(size: int, latencies: list[float]) -> float | None:
    """Throughput of one direction from its mean latency."""
    return size / Distribution.of(latencies).mean / MB if latencies else None


def p50_ms(m: Measurement) -> float:
    return Distribution.of(m.encrypt).p50 * 1e3


def goals_of(m: dict[str, Measurement], c: Ceilings, size: int, high: int) -> list[Goal]:
    """The verdicts, from the named measurements and the ceilings."""

    def against(name: str, measured: float | None, unit: str, path: tuple[str, ...], what: str, goal: float) -> Goal:
        used, start, end = c.of(*path)
        kind = "at_most" if unit == "µs" else "share"
        return Goal(name, measured, unit, used, what, goal, kind, start, end)

    def absolute(name: str, measured: float, unit: str, goal: float) -> Goal:
        return Goal(name, measured, unit, None, "absolute", goal, "absolute")

    seq, stream, envelope = Distribution.of(m["encrypt_sequential"].encrypt), m["stream"], m["envelope"]
    rss = max(stream.rss_peak.values(), default=None)
    echo, hsm = ("raw_asgi_echo",), ("softhsm",)
    blob = human_size(size)
    kms, rest = m["kms_api_high"], m["rest_gcm_high"]
    kmip_door, native = kmip.sides(m)
    quota, highest = m["xks_open_loop_quota"], m["xks_open_loop_highest"]
    assert isinstance(quota, xks.OpenLoopRun) and isinstance(highest, xks.OpenLoopRun)
    return [
        against(f"1 KB encrypt x{high} (wrk)", m["encrypt_high"].ops_per_s, "req/s", (*echo, "requests_per_s"),
                "raw ASGI echo", 0.45),
        against(f"1 KB decrypt x{high} (wrk)", m["decrypt_high"].ops_per_s, "req/s", (*echo, "requests_per_s"),
                "raw ASGI echo", 0.45),
        against("service CPU per 1 KB encrypt", m["encrypt_high"].server_cpu_us_per_request, "µs",
                (*echo, "server_cpu_us_per_request"), "raw ASGI echo's", 2.5),
        against("batches 100 x 1 KB, CBC+HMAC key", m["batch"].ops_per_s, "items/s", (*hsm, "cbc_hmac_pair_1k"),
                "SoftHSM CBC+HMAC pairs, all cores", 0.60),
        against("batches 100 x 1 KB, GCM key", m["batch_gcm"].ops_per_s, "items/s", (*hsm, "gcm_1k"),
                "SoftHSM GCM, all cores", 0.60),
        against(f"on-board stream {blob} encrypt", mb_per_s(size, stream.encrypt), "MB/s",
                (*hsm, "chunked_cbc_mb_per_s_per_process"), "SoftHSM chunked CBC, one process", 0.25),
        against(f"on-board stream {blob} decrypt", mb_per_s(size, stream.decrypt), "MB/s",
                (*hsm, "chunked_cbc_mb_per_s_per_process"), "SoftHSM chunked CBC, one process", 0.25),
        against(f"SDK envelope {blob} encrypt", mb_per_s(size, envelope.encrypt), "MB/s",
                ("cryptography_aes_gcm_mb_per_s",), "cryptography AES-GCM, one core", 0.70),
        against(f"SDK envelope {blob} decrypt", mb_per_s(size, envelope.decrypt), "MB/s",
                ("cryptography_aes_gcm_mb_per_s",), "cryptography AES-GCM, one core", 0.70),
        Goal(f"KMS API Encrypt x{high} vs the emulator (one wrk)", kms.ops_per_s, "req/s", m["emulator_high"].ops_per_s,
             "emulator, same signed Encrypt", 10, "at_least"),
        Goal("KMS API CPU per Encrypt vs native REST", kms.server_cpu_us_per_request, "µs",
             rest.server_cpu_us_per_request, "native REST encrypt, same key", 1.3, "at_most"),
        Goal(f"KMIP Encrypt x{high} vs native REST encrypt (one driver)", kmip_door.ops_per_s, "req/s",
             native.ops_per_s, "native REST encrypt, same driver", 0.80, "share"),
        Goal("KMIP CPU per Encrypt vs native REST", kmip_door.server_cpu_us_per_request, "µs",
             native.server_cpu_us_per_request, "native REST encrypt, same driver", 1.2, "at_most"),
        Goal(f"Transit encrypt x{high} vs native REST encrypt (wrk)", m["transit_high"].ops_per_s, "req/s",
             rest.ops_per_s, "native REST encrypt, same key and driver", 0.80, "share"),
        Goal("Transit CPU per encrypt vs native REST", m["transit_high"].server_cpu_us_per_request, "µs",
             rest.server_cpu_us_per_request, "native REST encrypt, same key and driver", 1.2, "at_most"),
        absolute(f"XKS Encrypt p99 at {xks.QUOTA_PER_S:,.0f}/s (open loop)", quota.p99_ms, "ms", xks.P99_BUDGET_MS),
        Goal(f"XKS Encrypt rate with p99 <= {xks.P99_BUDGET_MS:g} ms (open loop)",
             highest.offered_per_s if highest.holds else None, "req/s", xks.QUOTA_PER_S,
             "AWS's default quota per key store", 1.0, "at_least"),
        absolute("sequential encrypt p50 (SDK)", seq.p50 * 1e3, "ms", 1.5),
        absolute("sequential encrypt p99 (SDK)", seq.p99 * 1e3, "ms", 4.0),
        absolute("sequential re-encrypt p50 (SDK)", p50_ms(m["reencrypt_sequential"]), "ms", 1.5),
        absolute("sequential data key p50 (SDK)", p50_ms(m["generate_data_key_sequential"]), "ms", 1.5),
        absolute("sequential MAC p50 (SDK)", p50_ms(m["mac_sequential"]), "ms", 1.5),
        absolute("peak RSS per worker (stream)", (rss or 0) / MB, "MB", 150),
        *sign_goals(m, c, high),
    ]  # fmt: skip


def sign_goals(m: dict[str, Measurement], c: Ceilings, high: int) -> list[Goal]:
    """Sign ops/s of each ``signing.SIGNERS`` row, native and through the KMS door, against SoftHSM's
    sign rate over all cores (a door row unmeasured when the door did not sign)."""
    goals = []
    for signer in signing.SIGNERS:
        used, start, end = c.of("softhsm", signer.ceiling)
        what = f"SoftHSM {ceilings.SIGN_CEILINGS[signer.ceiling]}, all cores"
        for door, name in (("native", f"{signer.title} sign x{high}, native (wrk)"),
                           ("kms", f"{signer.title} Sign x{high}, KMS door (wrk)")):  # fmt: skip
            run = m.get(f"sign_{door}_{signer.ceiling}")
            measured = None if run is None else run.ops_per_s
            goals.append(Goal(name, measured, "ops/s", used, what, 0.60, "share", start, end))
    return goals


# -- output ------------------------------------------------------------------------------------
def figure(value: float | None, unit: str = "") -> str:
    """A figure with sensible precision."""
    if value is None:
        return "—"
    text = f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def fraction_text(g: Goal) -> str:
    """The fraction as the goal speaks of it: a share in %, or a multiple."""
    if g.fraction is None:
        return "—"
    return f"{g.fraction:.2f}x" if g.kind in ("at_least", "at_most") else f"{g.fraction * 100:.0f} %"


def goal_text(g: Goal) -> str:
    sign = "≤" if g.kind in ("at_most", "absolute") else "≥"
    if g.kind == "share":
        return f"{sign} {g.goal * 100:.0f} %"
    return f"{sign} {g.goal:g} {g.unit}" if g.kind == "absolute" else f"{sign} {g.goal:g}x"


def goals_table(goals: list[Goal], errors: int, fast: bool) -> Table:
    """The targets block: measured / ceiling / fraction / goal / verdict (``fast``: no verdicts, since
    tiny sizes and windows judge nothing)."""
    title = "targets, as fractions of ceilings measured in the same run (ceiling = "
    title += (MEASURED_ONCE if fast else COMBINED) + ")"
    if fast:
        title += " — [bold yellow]--fast: tiny sizes and windows, a smoke run: no verdicts[/]"
    if errors:
        title += f" — [bold red]{errors} ERRORS: not valid[/]"
    table = Table(title=title, title_justify="left")
    columns = ("target", "measured", "ceiling", "of", "fraction", "goal", *(() if fast else ("met",)))
    for column in columns:
        table.add_column(column, justify="left" if column in ("target", "of") else "right")
    for g in goals:
        ceiling = figure(g.ceiling, g.unit) if g.ceiling is not None else "—"
        cells = [g.name, figure(g.measured, g.unit), ceiling, g.ceiling_name, fraction_text(g), goal_text(g)]
        if not fast:
            cells.append({True: "[green]yes[/]", False: "[red]no[/]", None: "?"}[g.met])
        table.add_row(*cells)
    return table


def ceilings_line(c: Ceilings, once: bool = False) -> str:
    """The main ceilings, start → end (``once``: the one measurement of ``--fast``)."""
    parts = []
    for label, path, unit in (
        ("raw ASGI echo", ("raw_asgi_echo", "requests_per_s"), "req/s"),
        ("its CPU", ("raw_asgi_echo", "server_cpu_us_per_request"), "µs/req"),
        ("FastAPI echo", ("fastapi_echo", "requests_per_s"), "req/s"),
        ("SoftHSM CBC+HMAC pairs", ("softhsm", "cbc_hmac_pair_1k"), "/s"),
        ("SoftHSM GCM", ("softhsm", "gcm_1k"), "/s"),
        ("chunked CBC, one process", ("softhsm", "chunked_cbc_mb_per_s_per_process"), "MB/s"),
        ("SoftHSM RSA-2048 PSS sign", ("softhsm", "rsa_2048_pss_sign"), "/s"),
        ("SoftHSM ECDSA P-256 sign", ("softhsm", "ecdsa_p256_sign"), "/s"),
        ("AES-GCM one core", ("cryptography_aes_gcm_mb_per_s",), "MB/s"),
    ):
        _, start, end = c.of(*path)
        parts.append(f"{label} {figure(start)} {unit}" if once else f"{label} {figure(start)} → {figure(end)} {unit}")
    return ("ceilings (" + MEASURED_ONCE + "): " if once else "ceilings, start → end: ") + "; ".join(parts)


def informational(m: dict[str, Measurement]) -> dict[str, Any]:
    """Figures beside the targets: the same boto3 code, one client, against us and the emulator; and
    the emulator's CPU per signed ``Encrypt`` over ours in the one-driver runs (steadier than req/s
    on a loaded machine, since waiting for a core costs no CPU time)."""
    found: dict[str, Any] = {}
    for name in ("kms_api_boto3_sequential", "emulator_boto3_sequential"):
        seq = Distribution.of(m[name].encrypt)
        found[name] = {"ops_per_s": m[name].ops_per_s, "p50_ms": seq.p50 * 1e3, "p99_ms": seq.p99 * 1e3}
    ours, theirs = m["kms_api_high"].server_cpu_us_per_request, m["emulator_high"].server_cpu_us_per_request
    found["emulator_cpu_per_encrypt_over_ours"] = theirs / ours if ours and theirs else None
    highest = m["xks_open_loop_highest"]
    assert isinstance(highest, xks.OpenLoopRun)
    found["xks_open_loop"] = {
        "quota": highest.tried[0],
        "highest_within_budget": highest.brief() if highest.holds else None,
        "tried": highest.tried,
        "load_average_1min": os.getloadavg()[0],
    }
    return found


def informational_lines(extra: dict[str, Any]) -> list[str]:
    """The informational figures, printed under the table."""
    ours, theirs = extra["kms_api_boto3_sequential"], extra["emulator_boto3_sequential"]
    return [
        f"same boto3 code, one client, 1 KB Encrypt: km-kms-api p50 {ours['p50_ms']:.2f} ms "
        f"({ours['ops_per_s']:,.0f} ops/s); emulator p50 {theirs['p50_ms']:.2f} ms ({theirs['ops_per_s']:,.0f} ops/s)",
        "one wrk, one signed Encrypt: the emulator's service CPU per request over ours "
        f"{figure(extra['emulator_cpu_per_encrypt_over_ours'])}x",
        xks_line(extra["xks_open_loop"]),
        *asymmetric_lines(extra["asymmetric"]),
    ]


def asymmetric_lines(found: dict[str, Any]) -> list[str]:
    """The SDK's p50 of verify, GetPublicKey and DeriveSharedSecret; CPU per sign; the door's refusals."""
    p50 = ", ".join(f"{name} {figure(found[f'{name}_p50_ms'], 'ms')}" for name in signing.SEQUENTIAL)
    cpu = "; ".join(
        f"{s.title} {figure(found[f'{s.ceiling}_cpu_us'], 'µs')} ({figure(found[f'{s.ceiling}_cpu_over_echo'])}x)"
        for s in signing.SIGNERS
    )
    lines = [
        f"asymmetric keys through the SDK, one client, p50: {p50} (P-256 keys)",
        f"service CPU per native sign, and over the raw ASGI echo's per request: {cpu}",
    ]
    for ceiling, refusal in found["door_refusals"].items():
        lines.append(f"KMS door Sign not measured for {ceiling}: the door answered {refusal}")
    return lines


def xks_line(found: dict[str, Any]) -> str:
    """The XKS latency row: p50/p99 at the quota and at the highest rate within the budget, the rates tried."""

    def at(run: dict[str, Any]) -> str:
        answered = f"{figure(run['answered_per_s'])}/s answered"
        return f"{figure(run['offered_per_s'])}/s: p50 {run['p50_ms']:.2f} ms, p99 {run['p99_ms']:.2f} ms ({answered})"

    best = found["highest_within_budget"]
    tried = ", ".join(f"{figure(r['offered_per_s'])}{'' if r['holds'] else ' (no)'}" for r in found["tried"])
    return (
        f"XKS Encrypt, open loop (a data key, CDIV asked), at AWS's quota {at(found['quota'])}; highest rate "
        f"with p99 <= {xks.P99_BUDGET_MS:g} ms: {at(best) if best else 'none held'} — rates tried {tried} "
        f"(load average {found['load_average_1min']:.1f})"
    )


def run(args: argparse.Namespace, console: Console) -> int:
    """Ceilings, measurements, ceilings again (not with ``--fast``); print the targets block, write
    ``targets.json``; 1 on errors."""
    if args.fast:
        for name, value in FAST.items():
            setattr(args, name, value)
    args.concurrency = [1, args.high_concurrency]
    with console.status("ceilings (start)") as status:
        start = measure_ceilings(args, lambda what: status.update(f"ceilings (start): {what}"))
    with rig(args, ["km", "km-batch", "km-envelope", "aws-kms", "km-kms-api"]) as r:
        environment = output.environment(args, r)
        with console.status("measuring") as status:
            done, signs = measurements(r, args, lambda name: status.update(f"measuring {name}"))
    if args.fast:
        end, bounds = start, Ceilings(start, start, MEASURED_ONCE)
    else:
        with console.status("ceilings (end)") as status:
            end = measure_ceilings(args, lambda what: status.update(f"ceilings (end): {what}"))
        bounds = Ceilings(start, end)
    goals = goals_of(done, bounds, args.stream_size, args.high_concurrency)
    errors = sum(m.error_count for m in done.values())
    measured = (start,) if args.fast else (start, end)
    errors += sum(int(c[name]["errors"]) for c in measured for name in ceilings.HTTP_SERVERS)
    console.print(goals_table(goals, errors, args.fast))
    console.print(ceilings_line(bounds, once=args.fast))
    extra = informational(done)
    extra["asymmetric"] = signs.informational(bounds.of("raw_asgi_echo", "server_cpu_us_per_request")[0])
    for line in informational_lines(extra):
        console.print(line)
    out = output.directory(args)
    document = {
        "ok": errors == 0,
        "errors_total": errors,
        "fast": bool(args.fast),
        "environment": environment,
        "command": output.command_line(),
        "ceilings": bounds.as_json(),
        "targets": [g.as_json() for g in goals],
        "informational": extra,
        "measurements": {name: m.as_json() for name, m in done.items()},
    }
    write_json(out / "targets.json", document)
    console.print(f"results: {out / 'targets.json'}")
    return 1 if errors else 0
