"""keymanager's AWS External Key Store door (``docs/xks.md``), loaded as AWS KMS loads it: at a rate.

* A key store of its own (a principal of role ``xks`` with a random prefix and a generated access
  key) and an ``AES_256_GCM`` key it may encrypt and decrypt with, made over the admin REST API.
* One XKS ``Encrypt`` as AWS KMS sends it for a ``GenerateDataKey``: a 32-byte data key, an AAD,
  a CDIV asked for; signed with botocore's ``SigV4Auth(credentials, "kms-xks-proxy", region)`` and
  replayed as those bytes (a signature stays valid five minutes at this door: each run signs again).
* **Open loop** (:func:`open_loop`): the requests are sent on a fixed schedule, ``rate`` per
  second, whether or not earlier answers came back (as AWS KMS's callers do: they do not wait for
  each other), over a pool of TLS connections that grows while every one is busy. Each latency
  runs from the request's *scheduled* time to its whole answer, so a service that falls behind
  shows it in the latencies rather than by being sent less (no coordinated omission). Every
  answer must be 200.
* :class:`RateSearch`: the run at AWS's default quota, 1,800 requests/s per external key store
  (:data:`QUOTA_PER_S`), and the highest rate this machine serves with p99 within AWS's 35 ms
  budget (:data:`P99_BUDGET_MS`), all answered: from the quota up by half while it holds, down
  while it does not, then halving the gap, at most :data:`SEARCH_STEPS` runs (:meth:`RateSearch.highest`).

AWS KMS gives each call 250 ms and recommends at most 35 ms of round trip to the proxy; the p99
is read against that budget.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import resource
import secrets
import ssl
from dataclasses import dataclass, field
from typing import Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from bench.kmip import Replay, read_answer
from bench.measure import Measurement, Window
from bench.probes import ServerProbe, cpu_seconds
from bench.service import Service
from bench.stats import Distribution

REGION = "eu-west-1"
SERVICE = "kms-xks-proxy"
P99_BUDGET_MS = 35.0
QUOTA_PER_S = 1800.0
"""AWS KMS's default request quota per external key store."""
DATA_KEY_BYTES = 32
SEARCH_STEPS = 7
FLOOR_PER_S = 10.0
POOL_MAX = 256
"""Connections a run may open at most (it opens more while all are busy); requests beyond wait for one."""
_AAD = b'{"aws:s3:arn":"arn:aws:s3:::bench-bucket/object"}'


@dataclass(frozen=True)
class KeyStore:
    """What a signed XKS request needs: the service, the store's prefix and credential, the key."""

    url: str
    prefix: str
    access_key_id: str
    secret_access_key: str
    key_id: str
    ca: str | None = None
    """The CA bundle that verifies the service (None: not verified)."""


def provision(service: Service) -> KeyStore:
    """A new key store with an access key, and a GCM key whose policy names it (admin REST)."""
    suffix = secrets.token_hex(4)
    name, prefix = f"bench-xks-{suffix}", f"bench/{suffix}"
    headers = {"Authorization": f"Bearer {service.admin_token}"}
    with httpx.Client(base_url=service.url, verify=service.ca or False, headers=headers, timeout=30) as admin:
        admin.post("/v1/principals", json={"name": name, "role": "xks", "xks_uri_prefix": prefix}).raise_for_status()
        pair = admin.post(f"/v1/principals/{name}/access-keys", json={})
        pair.raise_for_status()
        policy = {"encrypt": [name], "decrypt": [name]}
        key = admin.post("/v1/keys", json={"name": name, "algorithm": "AES_256_GCM", "policy": policy})
        key.raise_for_status()
    return KeyStore(
        service.url,
        prefix,
        pair.json()["access_key_id"],
        pair.json()["secret_access_key"],
        key.json()["id"],
        service.ca,
    )


def signed_encrypt(store: KeyStore, plaintext: bytes) -> Replay:
    """One XKS ``Encrypt`` of ``plaintext`` as AWS KMS sends it for a GenerateDataKey, signed now, as bytes."""
    path = f"/{store.prefix}/kms/xks/v1/keys/{store.key_id}/encrypt"
    body = json.dumps(
        {
            "requestMetadata": {
                "awsPrincipalArn": "arn:aws:iam::111122223333:role/bench",
                "kmsKeyArn": "arn:aws:kms:eu-west-1:111122223333:key/bench",
                "kmsOperation": "GenerateDataKey",
                "kmsRequestId": "bench",
                "kmsViaService": "s3",
            },
            "plaintext": base64.b64encode(plaintext).decode(),
            "additionalAuthenticatedData": base64.b64encode(_AAD).decode(),
            "encryptionAlgorithm": "AES_GCM",
            "ciphertextDataIntegrityValueAlgorithm": "SHA_256",
        }
    ).encode()
    url = httpx.URL(store.url)
    request = AWSRequest(method="POST", url=store.url + path, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(store.access_key_id, store.secret_access_key), SERVICE, REGION).add_auth(request)
    headers = {**dict(request.headers.items()), "Host": f"{url.host}:{url.port}", "Content-Length": str(len(body))}
    head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    tls = ssl.create_default_context(cafile=store.ca) if store.ca else _unverified()
    label = "keymanager XKS Encrypt of a data key, CDIV asked [open loop, asyncio, one signed request]"
    return Replay("km-xks", label, url.host, url.port or 443, head.encode() + body, "http", tls, len(plaintext))


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


# -- the open-loop driver -----------------------------------------------------------------------
@dataclass
class OpenLoopRun(Measurement):
    """A :class:`~bench.measure.Measurement` of one open-loop run, with the rate it was offered
    (``ops_per_s`` is the rate answered) and, for a search, every run it tried."""

    offered_per_s: float = 0.0
    tried: list[dict[str, Any]] = field(default_factory=list)

    @property
    def p99_ms(self) -> float:
        return Distribution.of(self.encrypt).p99 * 1e3

    @property
    def holds(self) -> bool:
        """p99 within the budget, every answer a 200, and the rate answered as offered (within 5 %)."""
        return (
            bool(self.encrypt)
            and self.p99_ms <= P99_BUDGET_MS
            and not self.errors
            and (self.ops_per_s >= 0.95 * self.offered_per_s)
        )

    def brief(self) -> dict[str, Any]:
        """What a search keeps of a run it tried."""
        spread = Distribution.of(self.encrypt)
        return {"offered_per_s": self.offered_per_s, "answered_per_s": self.ops_per_s, "p50_ms": spread.p50 * 1e3,
                "p99_ms": spread.p99 * 1e3, "errors": dict(self.errors), "holds": self.holds}  # fmt: skip


class _Pool:
    """Open TLS connections to the replay's service: an idle one, or a new one while under :data:`POOL_MAX`."""

    def __init__(self, replay: Replay) -> None:
        self.replay, self.opened = replay, 0
        self.idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def open(self) -> None:
        self.opened += 1
        r = self.replay
        self.idle.put_nowait(await asyncio.open_connection(r.host, r.port, ssl=r.tls, server_hostname=r.host))

    async def take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.idle.empty() and self.opened < POOL_MAX:
            await self.open()
        return await self.idle.get()


async def _one(pool: _Pool, due: float, latencies: list[float], errors: dict[str, int]) -> float:
    """The request due at ``due``, on a connection of ``pool``: when it ended; its latency (from ``due``)
    in ``latencies``, a failure in ``errors``."""
    loop = asyncio.get_running_loop()
    try:
        reader, writer = await pool.take()
        writer.write(pool.replay.request)
        answer = await read_answer(reader, "http")
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as failed:
        pool.opened -= 1
        errors[type(failed).__name__] = errors.get(type(failed).__name__, 0) + 1
        return loop.time()
    finished = loop.time()
    pool.idle.put_nowait((reader, writer))
    latencies.append(finished - due)
    if not pool.replay.succeeded(answer):
        errors["not 200"] = errors.get("not 200", 0) + 1
    return finished


async def _schedule(replay: Replay, rate: float, duration: float) -> tuple[list[float], dict[str, int], float]:
    """Send at ``rate`` for ``duration`` seconds (a pool opened first): the latencies, the errors, and
    the seconds from the first request's due time to the last answer."""
    loop = asyncio.get_running_loop()
    pool = _Pool(replay)
    await asyncio.gather(*(pool.open() for _ in range(max(4, min(POOL_MAX, int(rate * 0.01) + 4)))))
    latencies: list[float] = []
    errors: dict[str, int] = {}
    begin, total = loop.time() + 0.05, max(1, int(rate * duration))
    tasks, sent = [], 0
    while sent < total:
        now = loop.time()
        while sent < total and begin + sent / rate <= now:  # every request due by now, late or not
            tasks.append(loop.create_task(_one(pool, begin + sent / rate, latencies, errors)))
            sent += 1
        if sent < total:
            await asyncio.sleep(max(0.0, begin + sent / rate - loop.time()))
    ends = await asyncio.gather(*tasks)
    while not pool.idle.empty():
        pool.idle.get_nowait()[1].close()
    return latencies, errors, max(ends) - begin


def open_loop(replay: Replay, rate: float, window: Window, probe: ServerProbe) -> OpenLoopRun:
    """One open-loop run at ``rate`` requests/s (see the module docstring): a warm-up run at the same
    rate, then the measured one (``window.duration``, 5 s without one), the service's and this
    process's CPU read over the measured run only."""
    duration = window.duration or 5.0
    if window.warmup > 0:
        asyncio.run(_schedule(replay, rate, window.warmup))
    before, mine = cpu_seconds(probe.pids()), resource.getrusage(resource.RUSAGE_SELF)
    latencies, errors, span = asyncio.run(_schedule(replay, rate, duration))
    after, mine_after = cpu_seconds(probe.pids()), resource.getrusage(resource.RUSAGE_SELF)
    client = (mine_after.ru_utime + mine_after.ru_stime) - (mine.ru_utime + mine.ru_stime)
    return OpenLoopRun(
        target=replay.target,
        label=f"{replay.label}, {rate:,.0f}/s offered",
        size=replay.size,
        concurrency=0,
        mode="encrypt",
        repeat=0,
        items=1,
        elapsed=max(span, 1e-9),
        encrypt=latencies,
        decrypt=[],
        errors=errors,
        checked=len(latencies),
        client_cpu_s=client,
        client_procs=1,
        server_cpu_s=(after - before) if probe.known else None,
        driver="open loop (asyncio)",
        counted=len(latencies) - sum(errors.values()),
        offered_per_s=rate,
    )


class RateSearch:
    """The run at :data:`QUOTA_PER_S` (:meth:`at_quota`), then the highest rate whose run holds (:meth:`highest`)."""

    def __init__(self, store: KeyStore, window: Window, probe: ServerProbe, quota: float = QUOTA_PER_S) -> None:
        self.store, self.window, self.probe, self.quota = store, window, probe, quota
        self.runs: list[OpenLoopRun] = []

    def run(self, rate: float) -> OpenLoopRun:
        done = open_loop(signed_encrypt(self.store, os.urandom(DATA_KEY_BYTES)), rate, self.window, self.probe)
        self.runs.append(done)
        return done

    def at_quota(self) -> OpenLoopRun:
        return self.runs[0] if self.runs else self.run(self.quota)

    def highest(self) -> OpenLoopRun:
        """The fastest run that held: up by half from the quota while runs hold, down while they do not
        (to half the rate, or 80 % of the rate answered if less; not below :data:`FLOOR_PER_S`), then
        the gap halved (geometrically) until within 10 %, at most :data:`SEARCH_STEPS` runs in all.
        When none held, the last run (``holds`` false)."""
        best: OpenLoopRun | None = None
        failed: float | None = None
        rate = self.at_quota().offered_per_s
        for step in range(SEARCH_STEPS):
            done = self.at_quota() if step == 0 else self.run(rate)
            if done.holds and (best is None or rate > best.offered_per_s):
                best = done
            elif not done.holds:
                failed = rate if failed is None else min(failed, rate)
            if failed is None:
                rate *= 1.5
            elif best is None:
                if rate <= FLOOR_PER_S:
                    break
                rate = max(FLOOR_PER_S, min(rate / 2, done.ops_per_s * 0.8))  # below what was answered
            elif failed / best.offered_per_s < 1.1:
                break
            else:
                rate = (best.offered_per_s * failed) ** 0.5
        chosen = best or self.runs[-1]
        chosen.tried = [r.brief() for r in self.runs]
        return chosen
