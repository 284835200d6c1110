"""A stranger's failures never lock out a good client from the same address (a balancer, a NAT).

Against a real two-worker server over TLS: 60 bad bearer tokens a second for 10 s from 127.0.0.1,
each on a connection of its own (so both workers throttle the address), while from the same
address an existing token, a token made during the burst, an access key signing with boto3
(the KMS door) and a client certificate each make 20 requests, each on a connection of its own
(so both workers serve each). Bound: 0 of the 80 good requests refused; the stranger is still
throttled (most of its 600 requests answered 429, at most one audit record per worker summing
them up).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.security.conftest import Server, running_server

STRANGER_RATE = 60
BURST_SECONDS = 10.0
GOOD_REQUESTS = 20
ADMIN_ADDRESS = "127.0.0.5"  # the admin's own bucket: it makes the principals during the burst
CLOSE = {"Connection": "close"}  # a connection per request: each lands on either worker


def client(server: Server, token: str | None = None, address: str | None = None) -> httpx.Client:
    context = ssl.create_default_context(cafile=str(server.ca))
    transport = httpx.HTTPTransport(verify=context, local_address=address)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, transport=transport, headers=headers, timeout=30)


def new_app(server: Server, name: str) -> dict[str, Any]:
    with client(server, server.admin_token, ADMIN_ADDRESS) as admin:
        made = admin.post("/v1/principals", json={"name": name, "role": "app"})
        assert made.status_code == 201, made.text
        return dict(made.json())


def kms_of(server: Server, pair: dict[str, str]) -> Any:
    kms = boto3.client(
        "kms",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=pair["access_key_id"],
        aws_secret_access_key=pair["secret_access_key"],
        verify=str(server.ca),
        config=Config(retries={"max_attempts": 1}),
    )
    kms.meta.events.register("before-send.kms.*", lambda request, **_: request.headers.update(CLOSE))
    return kms


def stranger(server: Server, statuses: list[int], stop: threading.Event) -> None:
    """Bad tokens at ``STRANGER_RATE`` a second (three threads of a third each) until ``stop``."""

    def one_third() -> None:
        start, sent = time.monotonic(), 0
        with client(server, "kmt_" + "x" * 43) as bad:
            while not stop.is_set():
                statuses.append(bad.get("/v1/keys", headers=CLOSE).status_code)
                sent += 1
                time.sleep(max(0.0, start + sent * 3 / STRANGER_RATE - time.monotonic()))

    threads = [threading.Thread(target=one_third) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def good(requests: Callable[[], int], refused: list[int], spacing: float) -> None:
    """``GOOD_REQUESTS`` calls of ``requests`` (a status), ``spacing`` apart; the non-200 ones kept."""
    for _ in range(GOOD_REQUESTS):
        status = requests()
        if status != 200:
            refused.append(status)
        time.sleep(spacing)


@pytest.mark.own_server
def test_a_stranger_flooding_bad_tokens_refuses_no_good_client_from_its_address(tmp_path: Path) -> None:
    with running_server(tmp_path, workers=2) as server:
        steady = new_app(server, "steady")
        with client(server, server.admin_token, ADMIN_ADDRESS) as admin:
            pair = admin.post("/v1/principals/steady/access-keys", json={}).json()
            bound = {"name": "by-cert", "role": "app", "cert_subject": "CN=billing,O=keymanager"}
            assert admin.post("/v1/principals", json=bound).status_code == 201
            before = admin.get("/v1/audit", params={"limit": 1000}).json()["records"]
        kms = kms_of(server, pair)
        stranger_statuses: list[int] = []
        refused: dict[str, list[int]] = {"existing token": [], "new token": [], "access key": [], "certificate": []}
        stop = threading.Event()
        flood = threading.Thread(target=stranger, args=(server, stranger_statuses, stop))
        flood_started = time.monotonic()
        flood.start()
        deadline = time.monotonic() + 30
        while stranger_statuses.count(429) < 4:  # both workers' buckets for 127.0.0.1 (20 each) are spent
            assert time.monotonic() < deadline, stranger_statuses
            time.sleep(0.05)

        def existing() -> int:
            with client(server, steady["token"]) as app:
                return app.get("/v1/keys", headers=CLOSE).status_code

        tls = server.var_dir / "tls"  # the development client certificate of ``keymanager init``
        certificate = (str(tls / "client-billing.pem"), str(tls / "client-billing-key.pem"))

        def by_certificate() -> int:
            with server.client(cert=certificate) as app:
                return app.get("/v1/keys", headers=CLOSE).status_code

        def kms_call() -> int:
            try:
                kms.list_keys()
            except ClientError as exc:
                return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
            return 200

        def fresh() -> None:
            made = new_app(server, "fresh")  # made during the burst, used a moment later

            def call() -> int:
                with client(server, made["token"]) as app:
                    return app.get("/v1/keys", headers=CLOSE).status_code

            good(call, refused["new token"], 0.3)

        good_clients = [
            threading.Thread(target=good, args=(existing, refused["existing token"], 0.35)),
            threading.Thread(target=good, args=(kms_call, refused["access key"], 0.35)),
            threading.Thread(target=good, args=(by_certificate, refused["certificate"], 0.35)),
            threading.Thread(target=fresh),
        ]
        for thread in good_clients:
            thread.start()
        for thread in good_clients:
            thread.join()
        time.sleep(max(0.0, flood_started + BURST_SECONDS - time.monotonic()))
        stop.set()
        flood.join()
        flood_seconds = time.monotonic() - flood_started
        with client(server, server.admin_token, ADMIN_ADDRESS) as admin:
            after = admin.get("/v1/audit", params={"limit": 1000}).json()["records"]
    counts = {name: f"{len(statuses)} of {GOOD_REQUESTS} refused" for name, statuses in refused.items()}
    assert all(not statuses for statuses in refused.values()), (counts, refused)
    assert set(stranger_statuses) <= {401, 429}
    throttled = stranger_statuses.count(429)
    # What the throttle lets through: each worker's burst (20) and its refill (2 a second) over the
    # flood's real duration (longer than BURST_SECONDS on a loaded machine), and half as much again:
    # the stranger's three threads keep requests in flight, and one that passed the bucket's check
    # while another's lookup was still awaited is counted after it (seen: up to 93 of a model's 80).
    let_through = 1.5 * 2 * (20 + 2 * flood_seconds)
    assert throttled >= len(stranger_statuses) - let_through, (throttled, len(stranger_statuses), flood_seconds)
    seen = max(r["position"] for r in before)
    summaries = [r for r in after if r["position"] > seen and r["action"] == "auth.failed"]
    assert len(summaries) <= 2, summaries
