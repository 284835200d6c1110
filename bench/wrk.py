"""``--driver wrk``: small-field encryption driven by wrk (C, event loop) instead of Python clients.

wrk posts one request over and over from a Lua script — the encrypt (or decrypt) JSON with the
bearer token, or (``bench.kmsdoor``) one SigV4-signed AWS KMS ``Encrypt`` — and, when done, prints
its request count and 1,000 latency quantiles; those quantiles stand in for the raw latencies. wrk
does not read bodies: a decryption by the SDK before the run checks the key works, and wrk's count
of non-2xx answers and socket errors is the error count.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.load import WARMUP_BYTES
from bench.measure import Measurement, Window
from bench.probes import ServerProbe, cpu_seconds
from bench.service import Endpoint

QUANTILES = 1000
SCRIPT = """
wrk.method = "POST"
wrk.path = {path}
wrk.body = {body}
{headers}

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("KMBENCH %d %d %d %d\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status))
  io.write("KMBENCH_Q")
  for i = 1, {quantiles} do io.write(" ", latency:percentile(i * 100.0 / {quantiles})) end
  io.write("\\n")
end
"""


def available() -> bool:
    """True when the ``wrk`` binary is on the PATH."""
    return shutil.which("wrk") is not None


def lua_string(text: str) -> str:
    """A Lua string literal (JSON's escapes are valid Lua escapes for these ASCII strings)."""
    return json.dumps(text)


def lua(path: str, body: str, headers: dict[str, str]) -> str:
    """The Lua script of one POST replayed: ``path``, ``body`` and ``headers`` as given."""
    lines = "\n".join(f"wrk.headers[{lua_string(k)}] = {lua_string(v)}" for k, v in headers.items())
    return SCRIPT.format(path=lua_string(path), body=lua_string(body), headers=lines, quantiles=QUANTILES)


def script(endpoint: Endpoint, size: int, decrypt: bool) -> str:
    """The Lua script for encrypting a random ``size``-byte field, or decrypting one ciphertext of it."""
    plaintext = os.urandom(size)
    with endpoint.client() as km:
        ciphertext = km.encrypt(endpoint.key, plaintext)
        if km.decrypt(ciphertext) != plaintext:
            raise RuntimeError("the service's decryption differs from the plaintext")
    if decrypt:
        path, body = "/v1/decrypt", json.dumps({"ciphertext": ciphertext})
    else:
        path, body = f"/v1/keys/{endpoint.key}/encrypt", json.dumps({"plaintext": base64.b64encode(plaintext).decode()})
    return lua(path, body, {"Content-Type": "application/json", "Authorization": f"Bearer {endpoint.token}"})


def run_wrk(url: str, lua: Path, concurrency: int, seconds: float) -> str:
    """Run wrk; its standard output."""
    threads = max(1, min(os.cpu_count() or 1, concurrency))
    command = ["wrk", "-t", str(threads), "-c", str(concurrency), "-d", f"{max(1, round(seconds))}s", "-s", str(lua)]
    done = subprocess.run([*command, url], capture_output=True, text=True, timeout=seconds + 120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed: {done.stderr[-1000:]}")
    return done.stdout


def parse(stdout: str) -> tuple[int, float, int, int, list[float]]:
    """Requests, seconds, socket errors, status errors and latency quantiles (seconds) of wrk's output."""
    counts = next(line.split()[1:] for line in stdout.splitlines() if line.startswith("KMBENCH "))
    quantiles = next(line.split()[1:] for line in stdout.splitlines() if line.startswith("KMBENCH_Q"))
    requests, micros, socket_errors, status_errors = (int(x) for x in counts)
    return requests, micros / 1e6, socket_errors, status_errors, [float(q) / 1e6 for q in quantiles]


def measure_wrk(
    endpoint: Endpoint,
    label: str,
    size: int,
    concurrency: int,
    window: Window,
    probe: ServerProbe,
    repeat: int = 0,
    mode: str = "encrypt",
) -> Measurement:
    """Warm up, then one wrk run of ``window.duration`` seconds of the service's encrypt (or decrypt)."""
    warm = script(endpoint, min(size, WARMUP_BYTES), decrypt=mode == "decrypt") if window.warmup >= 0.5 else None
    measured = script(endpoint, size, decrypt=mode == "decrypt")
    return measure_lua(
        endpoint.url, measured, warm, Run("km", f"{label} [wrk]", size, concurrency, mode, repeat), window, probe
    )


@dataclass(frozen=True)
class Run:
    """What a wrk measurement is called in the report."""

    target: str
    label: str
    size: int
    concurrency: int
    mode: str = "encrypt"
    repeat: int = 0


def measure_lua(url: str, measured: str, warm: str | None, run: Run, window: Window, probe: ServerProbe) -> Measurement:
    """Run the ``warm`` script for ``window.warmup`` seconds (when given), then ``measured`` for
    ``window.duration`` seconds at ``run.concurrency`` connections; a measurement of wrk's figures,
    with the CPU ``probe``'s processes spent meanwhile."""
    if not available():
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    with tempfile.TemporaryDirectory() as tmp:
        lua_file = Path(tmp) / "measured.lua"
        lua_file.write_text(measured)
        if warm is not None:
            warm_file = Path(tmp) / "warm.lua"
            warm_file.write_text(warm)
            run_wrk(url, warm_file, run.concurrency, window.warmup)
        before, children = cpu_seconds(probe.pids()), resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        stdout = run_wrk(url, lua_file, run.concurrency, window.duration or 5.0)
        after, children_after = cpu_seconds(probe.pids()), resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed_wall = time.monotonic() - start
    requests, seconds, socket_errors, status_errors, quantiles = parse(stdout)
    errors = {k: v for k, v in (("socket", socket_errors), ("non-2xx", status_errors)) if v}
    client = (children_after.ru_utime + children_after.ru_stime) - (children.ru_utime + children.ru_stime)
    return Measurement(
        target=run.target,
        label=run.label,
        size=run.size,
        concurrency=run.concurrency,
        mode=run.mode,
        repeat=run.repeat,
        items=1,
        elapsed=seconds or elapsed_wall,
        encrypt=quantiles if run.mode != "decrypt" else [],
        decrypt=quantiles if run.mode == "decrypt" else [],
        errors=errors,
        checked=1,
        client_cpu_s=client,
        client_procs=1,
        server_cpu_s=(after - before) if probe.known else None,
        driver="wrk",
        counted=requests - status_errors,
    )
