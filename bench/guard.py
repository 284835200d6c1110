"""One side's turn in a round of ``bench compare`` (the guard, issue 36): the ceilings of the turn,
then a fresh server of one tree and the hot path's figures measured against it, each a fraction of
a ceiling measured in the same turn with the same driver.

The rows (``--only`` picks some), each against a ceiling of the same turn:

- ``encrypt``: the 1 KB encrypt, wrk at ``--connections`` (``bench.fastpath``), against the raw
  ASGI HTTPS echo and the same wrk: req/s ÷ the echo's, the service's CPU per request ÷ the echo's;
- ``batch``: batches of 100 x 1 KB (``km-batch``, 8 Python clients), fields/s ÷ SoftHSM's
  CBC+HMAC pairs/s, one process per core;
- ``stream``: one client streaming ``--stream-size`` on board, encrypt then decrypt, each
  direction's MB/s ÷ SoftHSM's chunked CBC per process;
- ``kms``: the KMS door's ``Encrypt``, wrk replaying one signed request, ÷ the emulator's (moto)
  with the same wrk and request;
- ``kmip``: the KMIP door's 1 KB ``Encrypt`` (TTLV over mTLS, ``bench.kmip``) ÷ the native REST
  encrypt of the same field, one asyncio driver replaying both, KMIP then REST: req/s and the
  service's CPU per request.

The emulator starts once per turn beside the server; the SoftHSM ceilings run in the token of the
installation the echo uses, while no server runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from bench import kmip
from bench.ceilings import hsm_ceilings, http_ceiling
from bench.fastpath import FIELD_BYTES, encrypt_run
from bench.goals import BATCH_CONCURRENCY, field_run, mb_per_s, stream_run, window_of
from bench.kmsdoor import kms_encrypt_wrk
from bench.probes import ServerProbe
from bench.rig import rig
from bench.service import Endpoint, Service, serve

ROWS = ("encrypt", "batch", "stream", "kms", "kmip")
FIGURES = {
    "of_echo": ("encrypt", "1 KB encrypt req/s ÷ the echo's", "higher", "%"),
    "cpu_of_echo": ("encrypt", "service CPU per 1 KB encrypt ÷ the echo's", "lower", "x"),
    "cpu_us_per_encrypt": (
        "encrypt",
        "service CPU µs per 1 KB encrypt, raw (without the echo's own noise)",
        "lower",
        "µs",
    ),
    "batch_of_pairs": ("batch", "batches 100 x 1 KB fields/s ÷ SoftHSM CBC+HMAC pairs/s", "higher", "%"),
    "stream_encrypt_of_cbc": ("stream", "on-board stream encrypt MB/s ÷ SoftHSM chunked CBC", "higher", "%"),
    "stream_decrypt_of_cbc": ("stream", "on-board stream decrypt MB/s ÷ SoftHSM chunked CBC", "higher", "%"),
    "kms_of_emulator": ("kms", "KMS door Encrypt req/s ÷ the emulator's (one wrk)", "higher", "%"),
    "kmip_of_rest": ("kmip", "KMIP Encrypt req/s ÷ native REST encrypt's (one driver)", "higher", "%"),
    "kmip_cpu_of_rest": ("kmip", "service CPU per KMIP Encrypt ÷ native REST's", "lower", "x"),
}
"""Each figure of a run: its row, what it is, which way is better, how it is shown. The raw CPU per
request sits beside the ratios: the echo's ceiling varies more between turns than the service's
CPU per request does, so a small change shows there first (the ratios are the figures to report)."""


def shown(name: str, value: float) -> str:
    """A figure as the table shows it: a share in %, a multiple, or µs."""
    unit = FIGURES[name][3]
    return f"{100 * value:.1f} %" if unit == "%" else f"{value:.2f}x" if unit == "x" else f"{value:.0f} µs"


HSM_CEILINGS = ("cbc_hmac_pair_1k", "chunked_cbc_mb_per_s")


def figures_of(rows: tuple[str, ...]) -> list[str]:
    """The figures the chosen rows give, in ``FIGURES``' order."""
    return [name for name, (row, *_) in FIGURES.items() if row in rows]


def ceilings_of(rows: tuple[str, ...], echo_dir: Path, pin: str, args: argparse.Namespace) -> dict[str, Any]:
    """The ceilings the rows need, measured now: the echo (``encrypt``), SoftHSM (``batch``, ``stream``)."""
    found: dict[str, Any] = {}
    if "encrypt" in rows:
        found["echo"] = http_ceiling(
            "raw_asgi_echo", echo_dir, args.workers, args.connections, args.duration, args.warmup
        )
    if {"batch", "stream"} & set(rows):
        processes = os.cpu_count() or 1
        found["softhsm"] = hsm_ceilings(
            echo_dir / "softhsm2.conf", "km-bench", pin, processes, args.hsm_seconds, HSM_CEILINGS
        )
    return found


def options(args: argparse.Namespace) -> argparse.Namespace:
    """The arguments ``bench.goals``' measurements read, from ``compare``'s."""
    return argparse.Namespace(
        spawn=False, workers=args.workers, client_procs=None, concurrency=[1, args.connections], batch=100,
        aws_region=None, aws_profile=None, aws_key_id=None, field_size=FIELD_BYTES, high_concurrency=args.connections,
        duration=args.duration, warmup=args.warmup, requests=None, stream_size=args.stream_size,
    )  # fmt: skip


def side(
    home: Path, var_dir: Path, pin: str, tree: Path, ceiling: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """Serve ``tree``'s code from the installation of ``home`` and measure ``args.only``'s rows against
    it; every figure as a fraction of ``ceiling``, with the raw figures and the errors."""
    rows, settings = tuple(args.only), {"PYTHONPATH": str(tree)}
    targets = ["km", *(["km-batch"] if "batch" in rows else []), *(["km-kms-api", "aws-kms"] if "kms" in rows else [])]
    load_before = os.getloadavg()[0]
    run: dict[str, Any] = {"errors": 0, "ceilings": ceiling}
    with (
        serve(home, var_dir, pin, args.workers, settings=settings) as service,
        rig(options(args), targets, service) as r,
    ):
        assert r.endpoint is not None
        if "encrypt" in rows:
            found = encrypt_run(service, r.endpoint, args)
            echo = ceiling["echo"]
            run["encrypt"] = found
            run["of_echo"] = found["requests_per_s"] / echo["requests_per_s"]
            run["cpu_us_per_encrypt"] = found["server_cpu_ms_per_request"] * 1000
            run["cpu_of_echo"] = run["cpu_us_per_encrypt"] / max(echo["server_cpu_us_per_request"], 1e-9)
            run["errors"] += found["errors"] + echo["errors"]
        if "batch" in rows:
            batch = field_run(r, options(args), "km-batch", "encrypt", BATCH_CONCURRENCY)
            run["batch"] = batch.as_json()
            run["batch_of_pairs"] = batch.ops_per_s / ceiling["softhsm"]["cbc_hmac_pair_1k"]
            run["errors"] += batch.error_count
        if "stream" in rows:
            stream = stream_run(r, options(args), "km")
            cbc = ceiling["softhsm"]["chunked_cbc_mb_per_s_per_process"]
            run["stream"] = stream.as_json()
            run["stream_encrypt_of_cbc"] = (mb_per_s(args.stream_size, stream.encrypt) or 0.0) / cbc
            run["stream_decrypt_of_cbc"] = (mb_per_s(args.stream_size, stream.decrypt) or 0.0) / cbc
            run["errors"] += stream.error_count
        if "kms" in rows:
            assert r.door is not None and r.aws is not None
            plaintext, window = os.urandom(FIELD_BYTES), window_of(options(args))
            door = kms_encrypt_wrk(r.door, plaintext, args.connections, window, r.probe, "km-kms-api")
            emulator = kms_encrypt_wrk(
                r.aws, plaintext, args.connections, window, r.emulator_probe, "aws-kms (emulator)"
            )
            run["kms"], run["emulator"] = door.as_json(), emulator.as_json()
            run["kms_of_emulator"] = door.ops_per_s / max(emulator.ops_per_s, 1e-9)
            run["errors"] += door.error_count + emulator.error_count
        if "kmip" in rows:
            found = kmip_row(service, r.endpoint, r.probe, args)
            run["errors"] += found.pop("errors")
            run.update(found)
    run["load_average"] = [load_before, os.getloadavg()[0]]
    return run


def kmip_row(service: Service, endpoint: Endpoint, probe: ServerProbe, args: argparse.Namespace) -> dict[str, Any]:
    """The ``kmip`` row: one round of ``bench.kmip``'s interleaved runs (KMIP, then native REST) against
    ``service``, its two figures, the sides' summaries and their errors."""
    client = kmip.provision(service)
    replays = kmip.kmip_replay(client, FIELD_BYTES), kmip.rest_replay(endpoint, FIELD_BYTES)
    plan = kmip.interleaved(*replays, args.connections, window_of(options(args)), probe, rounds=1)
    door, native = kmip.sides({name: measure() for name, measure in plan.items()})
    ours, theirs = door.server_cpu_us_per_request, native.server_cpu_us_per_request
    return {
        "kmip": {"kmip": door.summary(), "native": native.summary()},
        "kmip_of_rest": door.ops_per_s / max(native.ops_per_s, 1e-9),
        "kmip_cpu_of_rest": (ours or 0.0) / max(theirs or 0.0, 1e-9),
        "errors": door.error_count + native.error_count,
    }
