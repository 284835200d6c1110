"""keymanager's KMIP door (``docs/kmip.md``) beside native REST encrypt, one driver for both.

* A principal of its own bound to a client certificate that ``keymanager dev-cert`` issues from the
  spawned service's development CA, allowed to create the keys it owns; over KMIP (PyKMIP's
  ``ProxyKmipClient``) it creates an AES-256 key and activates it, as libmongocrypt does.
* One KMIP ``Encrypt`` of the field (AES-CBC, PKCS5 padding, the IV chosen by the server: what
  libmongocrypt sends), encoded once into TTLV with PyKMIP's codec; one answer decoded and its
  ciphertext decrypted back over KMIP before any measurement, so the replayed request is known good.
* The native side: the REST encrypt (``POST /v1/keys/{key}/encrypt`` with the bench principal's
  bearer token) of a field of the same size, encoded once as an HTTP/1.1 request.
* ``Replay``, the driver: N asyncio connections over TLS (mutual for KMIP), each sending the same
  bytes and reading one whole answer before the next (TTLV: the 8-byte item header, then its
  length; HTTP: the head, then ``Content-Length``), as wrk replays HTTP. Every answer is checked
  (KMIP: result status Success; HTTP: 200); the service's CPU is read from ``/proc`` (psutil) over
  the measured window. Rounds alternate KMIP and REST, so the load of the machine falls on both.

``python -m bench kmip --spawn`` runs the comparison alone (``kmip.json``); ``python -m bench targets``
judges it among the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import resource
import secrets
import ssl
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from bench.arguments import parse_size
from bench.environment import describe
from bench.measure import Measurement, Window
from bench.output import command_line, directory, save
from bench.probes import ServerProbe, cpu_seconds
from bench.service import Endpoint, Service, keymanager_command, server_env, spawned
from bench.service import provision as provision_rest
from bench.stats import Distribution

ROUNDS = 2
"""KMIP and REST runs, alternating: KMIP, REST, KMIP, REST."""
PREFIXES = ("kmip_encrypt_high_", "kmip_native_high_")
"""The names of the KMIP and the native rounds, followed by the round's number."""
KMIP_SUCCESS = bytes.fromhex("42007f05000000040000000000000000")
"""The TTLV item ``ResultStatus = Success`` (tag 0x42007F, enumeration, 4 bytes, padded to 8)."""
TTLV_HEADER = 8
"""Tag (3 bytes), type (1), length (4): what precedes the value of every TTLV item."""


@dataclass(frozen=True)
class Replay:
    """One request's bytes replayed to ``host:port`` over ``tls``; ``framing`` is ``ttlv`` or ``http``."""

    target: str
    label: str
    host: str
    port: int
    request: bytes
    framing: str
    tls: ssl.SSLContext
    size: int

    def succeeded(self, answer: bytes) -> bool:
        """Whether ``answer`` says the operation succeeded."""
        if self.framing == "http":
            return answer.startswith(b"HTTP/1.1 200 ")
        return KMIP_SUCCESS in answer


@dataclass
class Tally:
    """What the connections of one run saw in the measured window."""

    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    last_end: float = 0.0

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def read_answer(reader: asyncio.StreamReader, framing: str) -> bytes:
    """One whole answer: a TTLV message (header and the length it gives) or an HTTP response."""
    if framing == "ttlv":
        header = await reader.readexactly(TTLV_HEADER)
        return header + await reader.readexactly(int.from_bytes(header[4:8], "big"))
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)\r$", head)
    return head + await reader.readexactly(int(length.group(1)) if length else 0)


async def connection(replay: Replay, start: float, end: float, tally: Tally) -> None:
    """One connection sending the request until ``end``; operations started from ``start`` count."""
    loop = asyncio.get_running_loop()
    try:
        reader, writer = await asyncio.open_connection(
            replay.host, replay.port, ssl=replay.tls, server_hostname=replay.host
        )
    except (OSError, ssl.SSLError) as failed:
        tally.error(type(failed).__name__)
        return
    try:
        while (began := loop.time()) < end:
            writer.write(replay.request)
            answer = await read_answer(reader, replay.framing)
            finished = loop.time()
            if began >= start:
                tally.latencies.append(finished - began)
                tally.last_end = max(tally.last_end, finished)
                if not replay.succeeded(answer):
                    tally.error("refused")
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as failed:
        tally.error(type(failed).__name__)
    finally:
        writer.close()


async def drive(replay: Replay, connections: int, warmup: float, duration: float) -> tuple[Tally, float]:
    """``connections`` connections for ``warmup`` + ``duration`` seconds; the tally and the window's start."""
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    tally = Tally()
    await asyncio.gather(*(connection(replay, start, start + duration, tally) for _ in range(connections)))
    return tally, start


def measure_replay(replay: Replay, connections: int, window: Window, probe: ServerProbe) -> Measurement:
    """Warm up (new connections), then one measured run of ``window.duration`` seconds; the service's
    CPU and the driver's over the measured run."""
    if window.warmup > 0:
        asyncio.run(drive(replay, connections, 0.0, window.warmup))
    duration = window.duration or 5.0
    before, mine = cpu_seconds(probe.pids()), resource.getrusage(resource.RUSAGE_SELF)
    tally, start = asyncio.run(drive(replay, connections, 0.0, duration))
    after, mine_after = cpu_seconds(probe.pids()), resource.getrusage(resource.RUSAGE_SELF)
    client = (mine_after.ru_utime + mine_after.ru_stime) - (mine.ru_utime + mine.ru_stime)
    failed = sum(tally.errors.values())
    return Measurement(
        target=replay.target,
        label=replay.label,
        size=replay.size,
        concurrency=connections,
        mode="encrypt",
        repeat=0,
        items=1,
        elapsed=max(tally.last_end - start, 1e-9),
        encrypt=tally.latencies,
        decrypt=[],
        errors=dict(tally.errors),
        checked=len(tally.latencies),
        client_cpu_s=client,
        client_procs=1,
        server_cpu_s=(after - before) if probe.known else None,
        driver="asyncio replay",
        counted=len(tally.latencies) - failed,
    )


# -- the two requests ---------------------------------------------------------------------------
@dataclass(frozen=True)
class KmipClient:
    """How the bench's KMIP principal reaches the service: the port and its certificate."""

    host: str
    port: int
    ca: str
    cert: str
    key: str

    def tls(self) -> ssl.SSLContext:
        """The client side of mTLS: this certificate, the service's CA."""
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.cert, self.key)
        return context

    def proxy(self) -> Any:
        """An opened PyKMIP ``ProxyKmipClient`` for this principal (``close()`` it)."""
        from kmip.pie.client import ProxyKmipClient

        client = ProxyKmipClient(
            hostname=self.host, port=self.port, cert=self.cert, key=self.key, ca=self.ca, config_file=os.devnull
        )
        client.open()
        return client


def provision(service: Service) -> KmipClient:
    """A principal ``bench-kmip-…`` bound to a ``keymanager dev-cert`` certificate (the spawned
    service's development CA), allowed to create keys; how it reaches the KMIP port."""
    if service.var_dir is None or service.kmip_port is None:
        raise SystemExit("the KMIP target needs --spawn (a client certificate from the service's development CA)")
    name = f"bench-kmip-{secrets.token_hex(4)}"
    done = subprocess.run(
        [*keymanager_command(), "dev-cert", name],
        env=server_env(service.var_dir, "unused"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"keymanager dev-cert failed: {done.stderr[-1000:]}")
    printed = dict(re.findall(r"^(client certificate|its key|subject):\s+(.+)$", done.stdout, re.MULTILINE))
    headers = {"Authorization": f"Bearer {service.admin_token}"}
    with httpx.Client(base_url=service.url, verify=service.ca or False, headers=headers, timeout=30) as admin:
        body = {"name": name, "role": "app", "cert_subject": printed["subject"], "create_keys": True}
        admin.post("/v1/principals", json=body).raise_for_status()
    assert service.ca is not None
    return KmipClient("127.0.0.1", service.kmip_port, service.ca, printed["client certificate"], printed["its key"])


def cbc_parameters() -> Any:
    """AES-CBC with PKCS5 padding and a server-chosen IV, as libmongocrypt asks for it."""
    from kmip.core import enums
    from kmip.core.attributes import CryptographicParameters

    return CryptographicParameters(
        block_cipher_mode=enums.BlockCipherMode.CBC,
        padding_method=enums.PaddingMethod.PKCS5,
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES,
        random_iv=True,
    )


def encrypt_request(key_id: str, plaintext: bytes) -> bytes:
    """The TTLV of one KMIP 1.2 request message holding one ``Encrypt`` of ``plaintext`` under ``key_id``."""
    from kmip.core import enums, utils
    from kmip.core.messages import contents, messages, payloads

    payload = payloads.EncryptRequestPayload(
        unique_identifier=key_id, cryptographic_parameters=cbc_parameters(), data=plaintext
    )
    item = messages.RequestBatchItem(operation=contents.Operation(enums.Operation.ENCRYPT), request_payload=payload)
    header = messages.RequestHeader(protocol_version=contents.ProtocolVersion(1, 2), batch_count=contents.BatchCount(1))
    stream = utils.BytearrayStream()
    messages.RequestMessage(request_header=header, batch_items=[item]).write(stream)
    return bytes(stream.buffer)


def encrypted_data(answer: bytes) -> tuple[bytes, bytes]:
    """The ciphertext and IV of a decoded ``Encrypt`` answer (raises unless it succeeded)."""
    from kmip.core import enums, utils
    from kmip.core.messages import messages

    message = messages.ResponseMessage()
    message.read(utils.BytearrayStream(answer))
    item = message.batch_items[0]
    if item.result_status.value != enums.ResultStatus.SUCCESS:
        raise RuntimeError(f"KMIP Encrypt refused: {item.result_reason} {item.result_message}")
    return item.response_payload.data, item.response_payload.iv_counter_nonce


def kmip_replay(client: KmipClient, size: int) -> Replay:
    """A new AES-256 key of the principal (created and activated over KMIP) and the replay of one
    ``Encrypt`` of a random ``size``-byte field under it, checked by decrypting one answer."""
    from kmip.core import enums

    proxy = client.proxy()
    try:
        key_id = proxy.create(enums.CryptographicAlgorithm.AES, 256)
        proxy.activate(key_id)
        plaintext = os.urandom(size)
        request = encrypt_request(key_id, plaintext)
        ciphertext, iv = encrypted_data(asyncio.run(exchange(client, request)))
        parameters = {"block_cipher_mode": enums.BlockCipherMode.CBC, "padding_method": enums.PaddingMethod.PKCS5,
                      "cryptographic_algorithm": enums.CryptographicAlgorithm.AES}  # fmt: skip
        if proxy.decrypt(ciphertext, key_id, parameters, iv) != plaintext:
            raise RuntimeError("the KMIP door's decryption differs from the plaintext")
    finally:
        proxy.close()
    label = "keymanager KMIP Encrypt, AES-256-CBC [asyncio replay, mTLS, one TTLV request]"
    return Replay("km-kmip", label, client.host, client.port, request, "ttlv", client.tls(), size)


async def exchange(client: KmipClient, request: bytes) -> bytes:
    """One request on a new connection; its answer."""
    reader, writer = await asyncio.open_connection(
        client.host, client.port, ssl=client.tls(), server_hostname=client.host
    )
    try:
        writer.write(request)
        return await read_answer(reader, "ttlv")
    finally:
        writer.close()


def rest_replay(endpoint: Endpoint, size: int) -> Replay:
    """The replay of the native REST encrypt of a random ``size``-byte field under the bench key."""
    url = httpx.URL(endpoint.url)
    body = json.dumps({"plaintext": base64.b64encode(os.urandom(size)).decode()}).encode()
    head = (
        f"POST /v1/keys/{endpoint.key}/encrypt HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
        f"Authorization: Bearer {endpoint.token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    tls = ssl.create_default_context(cafile=endpoint.ca)
    label = "keymanager REST encrypt, AES-256-CBC+HMAC [asyncio replay, TLS, one HTTP request]"
    return Replay("km", label, url.host, url.port or 443, head.encode() + body, "http", tls, size)


def interleaved(
    kmip: Replay, rest: Replay, connections: int, window: Window, probe: ServerProbe, rounds: int = ROUNDS
) -> dict[str, Callable[[], Measurement]]:
    """The runs of the comparison, in the order to run them: KMIP, REST, KMIP, REST (``rounds`` pairs)."""
    plan: dict[str, Callable[[], Measurement]] = {}
    for n in range(1, rounds + 1):
        plan[f"{PREFIXES[0]}{n}"] = lambda: measure_replay(kmip, connections, window, probe)
        plan[f"{PREFIXES[1]}{n}"] = lambda: measure_replay(rest, connections, window, probe)
    return plan


NOT_MEASURED = Measurement(
    "km-kmip", "not measured (--url)", 0, 0, "encrypt", 0, 1, 0.0, [], [], {}, 0, 0.0, 0, None, counted=0
)


def combined(runs: list[Measurement]) -> Measurement:
    """The rounds of one side as one measurement: operations, time, CPU and latencies added up."""
    first = runs[0]
    cpu = [m.server_cpu_s for m in runs]
    errors: dict[str, int] = {}
    for m in runs:
        for kind, count in m.errors.items():
            errors[kind] = errors.get(kind, 0) + count
    return Measurement(
        target=first.target,
        label=first.label,
        size=first.size,
        concurrency=first.concurrency,
        mode=first.mode,
        repeat=len(runs),
        items=1,
        elapsed=sum(m.elapsed for m in runs),
        encrypt=[x for m in runs for x in m.encrypt],
        decrypt=[],
        errors=errors,
        checked=sum(m.checked for m in runs),
        client_cpu_s=sum(m.client_cpu_s for m in runs),
        client_procs=1,
        server_cpu_s=None if None in cpu else sum(c for c in cpu if c is not None),
        driver=first.driver,
        counted=sum(m.operations for m in runs),
    )


def sides(measured: dict[str, Measurement]) -> tuple[Measurement, Measurement]:
    """The KMIP and the native rounds of ``interleaved`` among ``measured``, each side combined (a side
    not measured, as against ``--url``: no operations, no CPU, so its targets have no verdict)."""
    kmip, native = ([m for name, m in measured.items() if name.startswith(prefix)] for prefix in PREFIXES)
    return combined(kmip or [NOT_MEASURED]), combined(native or [NOT_MEASURED])


# -- python -m bench kmip -----------------------------------------------------------------------
GOAL_SHARE, GOAL_CPU = 0.80, 1.2
"""Issue 23's targets: KMIP ≥ 80 % of native REST's req/s, service CPU per Encrypt ≤ 1.2x native's."""


def table(done: dict[str, Measurement]) -> Table:
    """One row per run, in the order run, with the load average at its end."""
    shown = Table(title="1 KB encrypt: KMIP Encrypt (TTLV, mTLS) vs native REST, one asyncio driver")
    for column in ("run", "target", "connections", "req/s", "service CPU µs/req", "p50 ms", "errors"):
        shown.add_column(column, justify="left" if column in ("run", "target") else "right")
    for name, m in done.items():
        cpu = m.server_cpu_us_per_request
        p50 = Distribution.of(m.encrypt).p50 * 1e3 if m.encrypt else 0.0
        cells = (f"{m.ops_per_s:,.0f}", "—" if cpu is None else f"{cpu:,.0f}", f"{p50:.1f}", str(m.error_count))
        shown.add_row(name, m.target, str(m.concurrency), *cells)
    return shown


def verdict(done: dict[str, Measurement]) -> dict[str, Any]:
    """Each side's rounds added up, and the two fractions against their goals."""
    kmip, native = sides(done)
    share = kmip.ops_per_s / native.ops_per_s if native.ops_per_s else None
    ours, theirs = kmip.server_cpu_us_per_request, native.server_cpu_us_per_request
    cpu = ours / theirs if ours and theirs else None
    return {
        "kmip": kmip.summary(),
        "native": native.summary(),
        "ops_share": share,
        "ops_share_met": None if share is None else share >= GOAL_SHARE,
        "cpu_ratio": cpu,
        "cpu_ratio_met": None if cpu is None else cpu <= GOAL_CPU,
    }


def run(args: argparse.Namespace, console: Console) -> int:
    """Spawn a service, provision both sides, run the rounds; print, write ``kmip.json``; 1 on errors."""
    window = Window(args.warmup, args.duration)
    with spawned(args.workers) as service:
        probe = ServerProbe(service.pids, service.worker_pids)
        replays = (
            kmip_replay(provision(service), args.field_size),
            rest_replay(provision_rest(service), args.field_size),
        )
        done = {}
        for name, measure_one in interleaved(*replays, args.connections, window, probe, args.rounds).items():
            console.print(f"[dim]… {name} (load average {os.getloadavg()[0]:.1f})[/dim]")
            done[name] = measure_one()
    console.print(table(done))
    found = verdict(done)
    share, cpu = found["ops_share"], found["cpu_ratio"]
    console.print(
        f"KMIP {found['kmip']['ops_per_s']:,.0f} vs native {found['native']['ops_per_s']:,.0f} req/s = "
        f"{share or 0:.0%} (goal ≥ {GOAL_SHARE:.0%}); service CPU per Encrypt "
        f"{cpu or 0:.2f}x native's (goal ≤ {GOAL_CPU:g}x)"
    )
    environment = describe(service_workers=args.workers, load_generator={"driver": "asyncio replay"})
    document = {
        "command": command_line(),
        "environment": environment,
        **found,
        "measurements": {name: m.as_json() for name, m in done.items()},
    }
    out = directory(args)
    save(out / "kmip.json", document)
    console.print(f"written: {out / 'kmip.json'}")
    return 1 if any(m.error_count for m in done.values()) else 0


def add_parser(commands: Any) -> None:
    """The ``kmip`` subcommand."""

    c = commands.add_parser("kmip", help="KMIP Encrypt vs native REST encrypt on a spawned service, one driver")
    c.add_argument("--workers", type=int, default=2, help="server workers (default 2)")
    c.add_argument("--connections", type=int, default=32, help="connections of each run (default 32)")
    c.add_argument("--field-size", type=parse_size, default=1_000, help="plaintext of each request (default 1K)")
    c.add_argument("--duration", type=float, default=5.0, help="measured seconds per run (default 5)")
    c.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each (default 1)")
    c.add_argument("--rounds", type=int, default=ROUNDS, help=f"KMIP/REST pairs (default {ROUNDS})")
    c.add_argument("--out", help="output directory (default bench-out/<timestamp>)")
    c.set_defaults(func=run)
