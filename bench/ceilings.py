"""``python -m bench ceilings``: what this machine allows, measured with the service's own parts.

* **HTTP**: a bare ASGI echo and a FastAPI echo of the 1 KB encrypt body (``bench/echo.py``),
  served by uvicorn with the service's worker count and a certificate from ``keymanager init``,
  driven by wrk with the service targets' connection count: requests/s and server CPU per request.
* **SoftHSM** through python-pkcs11, one process per core at once, session keys as the service
  uses them: CBC-PAD, HMAC-SHA256, GCM and the CBC-PAD + HMAC pair on 1 KB, a single AES block
  (ECB), and chunked CBC in MB/s — per process and summed over the processes.
* **cryptography** AES-256-GCM on one core, MB/s (the SDK's envelope encryption).

Each figure is the denominator of a target in ``targets``: a fraction of a ceiling measured in
the same run says more on a shared VM than an absolute figure.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from rich.console import Console
from rich.table import Table

from bench.environment import describe
from bench.output import command_line, directory, save
from bench.probes import cpu_seconds
from bench.service import free_port, init_home

SOFTHSM_MODULE = "/usr/lib/softhsm/libsofthsm2.so"
FIELD_BYTES = 1_000
CHUNK_BYTES = 256 * 1024
"""Streamed CBC is fastest here in 256 KiB chunks (the service's stream segment size)."""
SETUP_TIMEOUT = 120.0
WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("CEILING %d %d %d %d\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status))
end
"""
SIGN_CEILINGS = {
    "rsa_2048_pss_sign": "RSA-2048 RSASSA_PSS_SHA_256",
    "ecdsa_p256_sign": "ECDSA P-256 ECDSA_SHA_256",
}
"""The sign ceilings of ``targets``' sign rows: figure name and what it signs."""
HTTP_SERVERS = {
    "raw_asgi_echo": ["bench.echo:raw_app"],
    "fastapi_echo": ["--factory", "bench.echo:fastapi_app"],
}


def encrypt_body(size: int = FIELD_BYTES) -> str:
    """The JSON of a ``size``-byte encrypt request, as the service targets send it."""
    return json.dumps({"plaintext": base64.b64encode(os.urandom(size)).decode()})


# -- HTTP ------------------------------------------------------------------------------------
def http_ceiling(
    name: str, var_dir: Path, workers: int, connections: int, duration: float, warmup: float
) -> dict[str, float]:
    """Serve ``HTTP_SERVERS[name]`` over TLS and drive it with wrk; req/s and server µs CPU/request."""
    port = free_port()
    tls = var_dir / "tls"
    command = [sys.executable, "-m", "uvicorn", *HTTP_SERVERS[name], "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", str(workers), "--http", "httptools", "--loop", "uvloop", "--log-level", "warning"]
    command += [
        "--no-access-log",
        "--ssl-certfile",
        str(tls / "server.pem"),
        "--ssl-keyfile",
        str(tls / "server-key.pem"),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"https://127.0.0.1:{port}"
    try:
        _wait_serving(url, str(tls / "ca.pem"), process)
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
            script.write(WRK_SCRIPT.format(body=json.dumps(encrypt_body())))
        path = f"{url}/v1/keys/ceiling/encrypt"
        if warmup >= 0.5:  # as bench.wrk: a shorter warm-up than wrk's one second is none
            _wrk(path, script.name, connections, warmup)
        pids = _tree(process.pid)
        cpu_before = cpu_seconds(pids)
        requests, seconds, errors = _wrk(path, script.name, connections, duration)
        cpu = cpu_seconds(pids) - cpu_before
        os.unlink(script.name)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {
        "requests_per_s": requests / seconds,
        "server_cpu_us_per_request": cpu / max(requests, 1) * 1e6,
        "errors": errors,
    }


def _wait_serving(url: str, ca: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"echo server exited: {(process.stderr.read() if process.stderr else b'')[-2000:]!r}")
        try:
            httpx.post(f"{url}/v1/keys/ceiling/encrypt", content=encrypt_body(16), verify=ca, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("echo server not serving within 60 s")


def _tree(pid: int) -> list[int]:
    parent = psutil.Process(pid)
    return [pid, *(child.pid for child in parent.children(recursive=True))]


def _wrk(url: str, script: str, connections: int, duration: float) -> tuple[int, float, int]:
    """Run wrk; (requests, seconds, errors)."""
    threads = min(connections, os.cpu_count() or 1)
    done = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{max(duration, 1):.0f}s", "-s", script, url],
        capture_output=True,
        text=True,
        timeout=duration + 60,
        check=True,
    )
    match = re.search(r"CEILING (\d+) (\d+) (\d+) (\d+)", done.stdout)
    if match is None:
        raise RuntimeError(f"wrk printed no summary: {done.stdout[-1000:]} {done.stderr[-1000:]}")
    requests, micros, errors, non_2xx = (int(g) for g in match.groups())
    return requests, micros / 1e6, errors + non_2xx


# -- SoftHSM ---------------------------------------------------------------------------------
def hsm_ceilings(
    conf: Path, label: str, pin: str, processes: int, seconds: float, only: tuple[str, ...] | None = None
) -> dict[str, float]:
    """Every SoftHSM operation (or those named in ``only``, e.g. ``("aes_block",)``) in ``processes``
    processes at once; ops/s (MB/s for chunked) summed, and per process."""
    context = multiprocessing.get_context("spawn")
    barrier, setup, results = context.Barrier(processes), context.Lock(), context.Queue()
    workers = [
        context.Process(target=_hsm_process, args=(str(conf), label, pin, seconds, (barrier, setup), results, only))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    rates = [results.get(timeout=SETUP_TIMEOUT + seconds * 30) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    if any(isinstance(rate, str) for rate in rates):
        raise RuntimeError(f"a SoftHSM measurement failed: {[r for r in rates if isinstance(r, str)]}")
    summed = {name: sum(rate[name] for rate in rates) for name in rates[0]}
    summed.update({f"{name}_per_process": summed[name] / processes for name in rates[0]})
    return summed


def _hsm_process(
    conf: str, label: str, pin: str, seconds: float, sync: tuple[Any, Any], results: Any, only: tuple[str, ...] | None
) -> None:
    barrier, setup = sync
    try:
        results.put(_hsm_rates(conf, label, pin, seconds, barrier, setup, only))
    except Exception as exc:  # reported to the parent, which fails the run
        barrier.abort()
        results.put(f"{type(exc).__name__}: {exc}")


def _hsm_rates(
    conf: str, label: str, pin: str, seconds: float, barrier: Any, setup: Any, only: tuple[str, ...] | None = None
) -> dict[str, float]:
    os.environ["SOFTHSM2_CONF"] = conf
    import pkcs11
    from pkcs11 import Attribute, KeyType, Mechanism

    with setup:  # one process at a time opens the token and logs in
        token = pkcs11.lib(SOFTHSM_MODULE).get_token(token_label=label)
        session = token.open(rw=True, user_pin=pin)
    with session:
        secret = {Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: False}
        aes = session.generate_key(
            KeyType.AES, 256, store=False, template={**secret, Attribute.ENCRYPT: True, Attribute.DECRYPT: True}
        )
        mac = session.generate_key(
            KeyType.GENERIC_SECRET,
            256,
            store=False,
            mechanism=Mechanism.GENERIC_SECRET_KEY_GEN,
            template={**secret, Attribute.SIGN: True, Attribute.VERIFY: True},
        )
        field, block, iv = os.urandom(FIELD_BYTES), os.urandom(16), os.urandom(16)
        chunks = [os.urandom(CHUNK_BYTES)] * 64

        def cbc() -> bytes:
            return bytes(aes.encrypt(field, mechanism=Mechanism.AES_CBC_PAD, mechanism_param=iv))

        def gcm() -> bytes:
            params = pkcs11.GCMParams(os.urandom(12), b"", 128)
            return bytes(aes.encrypt(field, mechanism=Mechanism.AES_GCM, mechanism_param=params))

        def chunked() -> int:
            stream = aes.encrypt(iter(chunks), mechanism=Mechanism.AES_CBC, mechanism_param=iv, buffer_size=CHUNK_BYTES)
            return sum(len(part) for part in stream)

        operations: dict[str, Callable[[], object]] = {
            "cbc_pad_1k": cbc,
            "hmac_1k": lambda: mac.sign(field, mechanism=Mechanism.SHA256_HMAC),
            "gcm_1k": gcm,
            "cbc_hmac_pair_1k": lambda: mac.sign(cbc(), mechanism=Mechanism.SHA256_HMAC),
            "aes_block": lambda: aes.encrypt(block, mechanism=Mechanism.AES_ECB),
        }
        if only is None or set(only) & SIGN_CEILINGS.keys():
            operations.update(_sign_operations(session, field))
        rates = {}
        for name, operation in operations.items():
            if only is None or name in only:
                barrier.wait(SETUP_TIMEOUT)
                rates[name] = _per_second(operation, seconds)
        if only is None or "chunked_cbc_mb_per_s" in only:
            barrier.wait(SETUP_TIMEOUT)
            rates["chunked_cbc_mb_per_s"] = _per_second(chunked, seconds, weight=len(chunks) * CHUNK_BYTES / 1e6)
        return rates


def _sign_operations(session: Any, message: bytes) -> dict[str, Callable[[], object]]:
    """The ``SIGN_CEILINGS`` operations on session key pairs made here (private, sensitive, sign only)."""
    from pkcs11 import MGF, Attribute, KeyType, Mechanism
    from pkcs11.util.ec import encode_named_curve_parameters

    private = {Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: False, Attribute.SIGN: True, Attribute.PRIVATE: True}
    public = {Attribute.VERIFY: True}
    _, rsa = session.generate_keypair(KeyType.RSA, 2048, store=False, public_template=public, private_template=private)
    curve = session.create_domain_parameters(
        KeyType.EC, {Attribute.EC_PARAMS: encode_named_curve_parameters("secp256r1")}, local=True
    )
    _, ec = curve.generate_keypair(store=False, public_template=public, private_template=private)
    pss = (Mechanism.SHA256, MGF.SHA256, 32)

    def rsa_pss() -> bytes:
        digest = hashlib.sha256(message).digest()
        return bytes(rsa.sign(digest, mechanism=Mechanism.RSA_PKCS_PSS, mechanism_param=pss))

    def ecdsa() -> bytes:
        digest = hashlib.sha256(message).digest()
        return bytes(ec.sign(digest, mechanism=Mechanism.ECDSA))

    return {"rsa_2048_pss_sign": rsa_pss, "ecdsa_p256_sign": ecdsa}


def _per_second(operation: Callable[[], object], seconds: float, weight: float = 1.0) -> float:
    operation()
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        operation()
        count += 1
    return count * weight / elapsed


# -- cryptography ------------------------------------------------------------------------------
def aes_gcm_mb_per_s(seconds: float) -> float:
    """cryptography's AES-256-GCM on one core, in 1 MiB chunks (the SDK envelope's primitive)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead, chunk = AESGCM(AESGCM.generate_key(256)), os.urandom(CHUNK_BYTES)
    return _per_second(lambda: aead.encrypt(os.urandom(12), chunk, None), seconds, weight=CHUNK_BYTES / 1e6)


# -- the command -------------------------------------------------------------------------------
def measure(args: argparse.Namespace, step: Callable[[str], None]) -> dict[str, Any]:
    """Every ceiling, in a temporary ``keymanager init`` home (its certificate and SoftHSM token)."""
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="km-ceilings-") as home:
        var_dir, pin = init_home(Path(home))
        for name in HTTP_SERVERS:
            step(f"HTTP ceiling: {name}")
            found[name] = http_ceiling(name, var_dir, args.workers, args.connections, args.duration, args.warmup)
        step("SoftHSM ceilings")
        processes = os.cpu_count() or 1
        found["softhsm"] = hsm_ceilings(var_dir / "softhsm2.conf", "km-bench", pin, processes, args.hsm_seconds)
        found["softhsm"]["processes"] = processes
    step("cryptography AES-256-GCM")
    found["cryptography_aes_gcm_mb_per_s"] = aes_gcm_mb_per_s(args.hsm_seconds)
    return found


def table(found: dict[str, Any]) -> Table:
    """The ceilings as rows of figure and unit."""
    t = Table(title="Ceilings of this machine (same run)")
    for column in ("ceiling", "figure", "unit"):
        t.add_column(column, justify="right" if column == "figure" else "left")
    for name in HTTP_SERVERS:
        t.add_row(f"{name} (wrk)", f"{found[name]['requests_per_s']:,.0f}", "req/s")
        t.add_row(f"{name} server CPU", f"{found[name]['server_cpu_us_per_request']:,.0f}", "µs/request")
    hsm = found["softhsm"]
    for name in ("cbc_pad_1k", "hmac_1k", "gcm_1k", "cbc_hmac_pair_1k", "aes_block"):
        t.add_row(f"SoftHSM {name}, {hsm['processes']} processes", f"{hsm[name]:,.0f}", "ops/s")
    for name, what in SIGN_CEILINGS.items():
        t.add_row(f"SoftHSM {what} sign (1 KB), {hsm['processes']} processes", f"{hsm[name]:,.0f}", "ops/s")
    t.add_row(f"SoftHSM chunked CBC, {hsm['processes']} processes", f"{hsm['chunked_cbc_mb_per_s']:,.0f}", "MB/s")
    t.add_row("SoftHSM chunked CBC, one process", f"{hsm['chunked_cbc_mb_per_s_per_process']:,.0f}", "MB/s")
    t.add_row("cryptography AES-256-GCM, one core", f"{found['cryptography_aes_gcm_mb_per_s']:,.0f}", "MB/s")
    return t


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure, print the table, write ``ceilings.json``; 1 when an HTTP ceiling saw errors."""
    out = directory(args)
    found = measure(args, lambda what: console.print(f"[dim]… {what}[/dim]"))
    console.print(table(found))
    save(
        out / "ceilings.json",
        {"command": command_line(), "environment": describe(load_generator={"driver": "wrk"}), "ceilings": found},
    )
    console.print(f"written: {out / 'ceilings.json'}")
    return 1 if any(found[name]["errors"] for name in HTTP_SERVERS) else 0


def add_parser(commands: Any) -> None:
    """The ``ceilings`` subcommand."""
    c = commands.add_parser("ceilings", help="what the machine allows: HTTPS echo, SoftHSM, AES-GCM")
    c.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="echo server workers (default: cores)")
    c.add_argument("--connections", type=int, default=32, help="wrk connections (default 32)")
    c.add_argument("--duration", type=float, default=5.0, help="seconds per HTTP measurement (default 5)")
    c.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each (default 1)")
    c.add_argument("--hsm-seconds", type=float, default=2.0, help="seconds per SoftHSM operation (default 2)")
    c.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    c.set_defaults(func=run)
