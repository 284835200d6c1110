"""``python -m bench client``: the client's own CPU per small-field encrypt, by HTTP path.

One process sends ``--requests`` sequential encrypts of ``--size`` bytes over TLS to the service
(``--spawn`` or ``--url``) through each path below, and reads ``time.process_time`` around them:
CPU this process spent per call (JSON, TLS, HTTP), whatever the service's speed. The paths run
in turn, ``--rounds`` times, so a load change on the machine touches them all; the median round
is reported. ``raw`` paths send the same request without the SDK, for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import secrets
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit

import httpx
import urllib3
from keymanager_sdk import AsyncKeyManager, KeyManager
from rich.console import Console
from rich.table import Table

from bench import environment, output
from bench.rig import service_from
from bench.service import Endpoint, provision

WARMUP_CALLS = 50
Run = Callable[[int], None]


def _sync_paths(endpoint: Endpoint, data: bytes, stack: ExitStack) -> dict[str, Run]:
    """The SDK's sync client, and raw urllib3 and httpx.Client with the same request."""
    sdk = stack.enter_context(KeyManager(endpoint.url, token=endpoint.token, ca=endpoint.ca, max_retries=0))
    path = f"/v1/keys/{endpoint.key}/encrypt"
    body = {"plaintext": base64.b64encode(data).decode()}
    headers = {"Authorization": f"Bearer {endpoint.token}", "Content-Type": "application/json"}
    context = ssl.create_default_context(cafile=endpoint.ca)
    parts = urlsplit(endpoint.url)
    pool = urllib3.HTTPSConnectionPool(parts.hostname or "", parts.port, ssl_context=context, maxsize=1)
    stack.callback(pool.close)
    plain = stack.enter_context(httpx.Client(base_url=endpoint.url, verify=context, headers=headers))

    def sdk_run(n: int) -> None:
        for _ in range(n):
            sdk.encrypt(endpoint.key, data)

    def urllib3_run(n: int) -> None:
        for _ in range(n):
            answer = pool.urlopen("POST", path, body=json.dumps(body).encode(), headers=headers, retries=False)
            assert answer.status == 200 and json.loads(answer.data)["ciphertext"]

    def httpx_run(n: int) -> None:
        for _ in range(n):
            answer = plain.post(path, json=body)
            assert answer.status_code == 200 and answer.json()["ciphertext"]

    return {"sdk KeyManager": sdk_run, "raw urllib3 pool": urllib3_run, "raw httpx.Client": httpx_run}


async def _async_paths(endpoint: Endpoint, data: bytes, rounds: int, requests: int) -> dict[str, list[float]]:
    """CPU ms per call of the SDK's async client and of raw httpx.AsyncClient, ``rounds`` times each."""
    context = ssl.create_default_context(cafile=endpoint.ca)
    headers = {"Authorization": f"Bearer {endpoint.token}"}
    body = {"plaintext": base64.b64encode(data).decode()}
    path = f"/v1/keys/{endpoint.key}/encrypt"
    async with (
        AsyncKeyManager(endpoint.url, token=endpoint.token, ca=endpoint.ca, max_retries=0) as sdk,
        httpx.AsyncClient(base_url=endpoint.url, verify=context, headers=headers) as plain,
    ):

        async def sdk_run(n: int) -> None:
            for _ in range(n):
                await sdk.encrypt(endpoint.key, data)

        async def httpx_run(n: int) -> None:
            for _ in range(n):
                answer = await plain.post(path, json=body)
                assert answer.status_code == 200 and answer.json()["ciphertext"]

        paths: dict[str, Callable[[int], Awaitable[None]]] = {
            "sdk AsyncKeyManager": sdk_run,
            "raw httpx.AsyncClient": httpx_run,
        }
        out: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(rounds):
            for name, run in paths.items():
                await run(WARMUP_CALLS)
                start = time.process_time()
                await run(requests)
                out[name].append((time.process_time() - start) / requests * 1e3)
        return out


def measure(endpoint: Endpoint, size: int, rounds: int, requests: int) -> dict[str, list[float]]:
    """Client CPU ms per encrypt of ``size`` bytes, per path, one value per round."""
    data = os.urandom(size)
    with ExitStack() as stack:
        paths = _sync_paths(endpoint, data, stack)
        out: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(rounds):
            for name, run in paths.items():
                run(WARMUP_CALLS)
                start = time.process_time()
                run(requests)
                out[name].append((time.process_time() - start) / requests * 1e3)
    out.update(asyncio.run(_async_paths(endpoint, data, rounds, requests)))
    return out


def run(args: argparse.Namespace, console: Console) -> int:
    """Measure every path, print the table, write ``client.json``."""
    requests = args.requests or 1000
    with service_from(args) as service:
        endpoint = provision(service)
        console.print(f"measuring client CPU per {args.size:,}-byte encrypt, {requests} calls x {args.rounds} rounds …")
        results = measure(endpoint, args.size, args.rounds, requests)
    table = Table(title=f"client CPU ms per {args.size:,} B encrypt", caption=f"median of {args.rounds} rounds")
    for column in ("path", "median", "min", "max"):
        table.add_column(column, justify="left" if column == "path" else "right")
    rows: list[dict[str, Any]] = []
    for name, values in results.items():
        row = {"path": name, "median_ms": statistics.median(values), "rounds_ms": values}
        rows.append(row)
        table.add_row(name, *(f"{v:.3f}" for v in (row["median_ms"], min(values), max(values))))
    console.print(table)
    out = output.directory(args)
    document = {
        "run_id": secrets.token_hex(4),
        "command": output.command_line(),
        "environment": environment.describe(url=endpoint.url, ca=endpoint.ca, service_spawned=bool(args.spawn)),
        "size": args.size,
        "requests": requests,
        "rows": rows,
    }
    output.save(out / "client.json", document)
    console.print(f"results: {out / 'client.json'}")
    return 0
