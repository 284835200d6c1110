"""``python -m bench transport``: what HTTPS and mTLS cost over plain HTTP, for small-field encryption.

With ``--spawn`` one installation is served in turn as plain HTTP (``--insecure-http``), HTTPS,
and HTTPS with client certificates (``KM_TLS_CLIENT_CA``; the client authenticates with
``var/tls/client-billing.pem``, bound to a principal ``CN=billing,O=keymanager``). With ``--url``
only that service is measured (its scheme names the mode). Connections are kept alive.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import environment, output
from bench.clients import TargetSpec
from bench.load import LoadPool
from bench.measure import Measurement, Window, measure
from bench.report import blob_document, human_size
from bench.rig import client_processes, server_probe, token_value
from bench.service import Endpoint, Service, init_home, mtls_endpoint, provision, serve
from bench.stats import redis_style_lines

MODES = ("http", "https", "mtls")


@contextmanager
def services(args: argparse.Namespace) -> Iterator[Iterator[tuple[str, Service, Endpoint]]]:
    """The (mode, service, endpoint) to measure, served one after the other."""
    if not args.spawn:
        service = Service(url=args.url, ca=args.ca, admin_token=token_value(args.token), pid=args.server_pid)
        mode = "http" if args.url.startswith("http:") else "https"
        yield iter([(mode, service, provision(service))])
        return
    home = Path(tempfile.mkdtemp(prefix="km-bench-transport-"))
    try:
        var_dir, pin = init_home(home)
        yield spawned_modes(args, home, var_dir, pin)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def spawned_modes(
    args: argparse.Namespace, home: Path, var_dir: Path, pin: str
) -> Iterator[tuple[str, Service, Endpoint]]:
    """Serve each mode in turn; one principal and key, provisioned on the first."""
    endpoint: Endpoint | None = None
    for mode in args.modes:
        with serve(home, var_dir, pin, args.workers, mode) as service:
            endpoint = endpoint or provision(service, mtls=True)
            here = Endpoint(url=service.url, key=endpoint.key, ca=service.ca, token=endpoint.token)
            yield mode, service, mtls_endpoint(here, var_dir) if mode == "mtls" else here


def measure_mode(
    pool: LoadPool, args: argparse.Namespace, mode: str, service: Service, endpoint: Endpoint
) -> list[Measurement]:
    """Encrypt-only measurements of one mode at every concurrency."""
    spec = TargetSpec("km", f"km {mode}", endpoint=endpoint)
    window = Window(args.warmup, None if args.requests else args.duration, args.requests)
    return [
        measure(pool, spec, args.size, c, "encrypt", window, server_probe(service), repeat)
        for repeat in range(args.repeat)
        for c in args.concurrency
    ]


def tls_of(mode: str, endpoint: Endpoint) -> dict[str, Any]:
    """The TLS session a client negotiates in ``mode``."""
    cert = (endpoint.client_cert, endpoint.client_key) if endpoint.client_cert and endpoint.client_key else None
    return environment.tls_session(endpoint.url, endpoint.ca, cert)


def print_mode(console: Console, m: Measurement, baseline: Measurement | None) -> None:
    """redis-benchmark style: the percentile lines, the rate, and the cost relative to HTTP."""
    console.print(f"[bold]====== {m.label}: encrypt {human_size(m.size)}, {m.concurrency} client(s) ======[/]")
    for line in redis_style_lines(m.encrypt):
        console.print("  " + line)
    cpu = m.server_cpu_us_per_request
    cpu_text = "" if cpu is None else f"; service CPU {cpu:,.0f} µs per request"
    console.print(f"  {m.ops_per_s:,.1f} requests per second; errors {m.error_count}{cpu_text}")
    if baseline is not None and baseline is not m and baseline.ops_per_s and m.ops_per_s:
        slower = (baseline.ops_per_s / m.ops_per_s - 1) * 100
        mean_extra = (sum(m.encrypt) / len(m.encrypt) - sum(baseline.encrypt) / len(baseline.encrypt)) * 1e3
        console.print(f"  relative to plain HTTP: {slower:+.1f}% time per request, {mean_extra:+.3f} ms mean latency")


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure every mode, print percentile lines, write ``transport.json``; 1 on errors."""
    measurements: list[Measurement] = []
    tls: dict[str, Any] = {}
    with ExitStack() as stack:
        pool = LoadPool(client_processes(args))
        stack.callback(pool.close)
        for mode, service, endpoint in stack.enter_context(services(args)):
            console.print(f"measuring {mode} ({service.url}) …")
            tls[mode] = tls_of(mode, endpoint)
            measurements += measure_mode(pool, args, mode, service, endpoint)
    for m in measurements:
        base = next((b for b in measurements if b.label == "km http" and b.concurrency == m.concurrency), None)
        print_mode(console, m, base)
    out = output.directory(args)
    env = environment.describe(tls_by_mode=tls, service_workers=args.workers if args.spawn else None)
    document = blob_document(measurements, env, command=output.command_line(), run_id=secrets.token_hex(4))
    output.save(out / "transport.json", document)
    console.print(f"results: {out / 'transport.json'}")
    return 1 if any(m.error_count for m in measurements) else 0
