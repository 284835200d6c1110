"""Service CPU per request: native REST encrypt against the AWS KMS API's Encrypt, one driver.

``python -m bench.kms_api_cost [--seconds 5] [--connections 8] [--rounds 3] [--size 1024]``
spawns a one-worker service, makes one ``AES_256_GCM`` key, an app principal allowed to
encrypt with it and an access key of that principal, then runs wrk alternately on two
requests — ``POST /v1/keys/{key}/encrypt`` with the bearer token, and ``POST /`` Encrypt
signed once with botocore's ``SigV4Auth`` (a signature stays valid 15 minutes; each round signs
again) — with the same plaintext and connections, and prints the worker's CPU time per
answered request for each, and their ratio. Any non-2xx answer fails the run.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import tempfile
from pathlib import Path

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from bench.probes import cpu_seconds
from bench.service import Service, spawned
from bench.wrk import lua_string, parse, run_wrk

LUA = """
wrk.method = "POST"
wrk.path = "/"
wrk.body = {body}
{headers}
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("KMBENCH %d %d %d %d\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status))
  io.write("KMBENCH_Q 0\\n")
end
"""


def provision(service: Service) -> tuple[str, str, tuple[str, str]]:
    """Key id, the app's bearer token, the app's access key pair."""
    with httpx.Client(base_url=service.url, verify=service.ca or False, timeout=30) as admin:
        admin.headers["Authorization"] = f"Bearer {service.admin_token}"
        token = admin.post("/v1/principals", json={"name": "cost", "role": "app"}).json()["token"]
        pair = admin.post("/v1/principals/cost/access-keys", json={}).json()
        key = admin.post(
            "/v1/keys", json={"name": "cost", "algorithm": "AES_256_GCM", "policy": {"encrypt": ["cost"]}}
        ).json()
    return key["id"], token, (pair["access_key_id"], pair["secret_access_key"])


def rest_lua(key: str, token: str, plaintext: bytes) -> str:
    body = json.dumps({"plaintext": base64.b64encode(plaintext).decode()})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    return _lua(f"/v1/keys/{key}/encrypt", body, headers)


def kms_lua(url: str, key: str, pair: tuple[str, str], plaintext: bytes) -> str:
    body = json.dumps({"KeyId": key, "Plaintext": base64.b64encode(plaintext).decode()})
    request = AWSRequest(
        method="POST",
        url=url + "/",
        data=body.encode(),
        headers={"X-Amz-Target": "TrentService.Encrypt", "Content-Type": "application/x-amz-json-1.1"},
    )
    SigV4Auth(Credentials(*pair), "kms", "eu-west-1").add_auth(request)
    return _lua("/", body, dict(request.headers.items()))


def _lua(path: str, body: str, headers: dict[str, str]) -> str:
    lines = "\n".join(f"wrk.headers[{lua_string(k)}] = {lua_string(v)}" for k, v in headers.items())
    return LUA.format(body=lua_string(body), headers=lines).replace('wrk.path = "/"', f"wrk.path = {lua_string(path)}")


def run(service: Service, lua: str, connections: int, seconds: float) -> tuple[int, float]:
    """Answered requests and the workers' CPU seconds of one wrk run."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "run.lua"
        script.write_text(lua)
        before = cpu_seconds(service.worker_pids())
        requests, _, socket_errors, status_errors, _ = parse(run_wrk(service.url, script, connections, seconds))
        spent = cpu_seconds(service.worker_pids()) - before
    if socket_errors or status_errors:
        raise SystemExit(f"wrk saw {socket_errors} socket errors and {status_errors} non-2xx answers")
    return requests, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    plaintext = os.urandom(args.size)
    totals = {"rest": [0, 0.0], "kms": [0, 0.0]}
    with spawned(workers=1) as service:
        key, token, pair = provision(service)
        run(service, rest_lua(key, token, plaintext), args.connections, 2)  # warm-up of both paths
        run(service, kms_lua(service.url, key, pair, plaintext), args.connections, 2)
        for number in range(args.rounds):
            for door, lua in (
                ("rest", rest_lua(key, token, plaintext)),
                ("kms", kms_lua(service.url, key, pair, plaintext)),
            ):
                requests, spent = run(service, lua, args.connections, args.seconds)
                totals[door][0] += requests
                totals[door][1] += spent
                rate, cost = requests / args.seconds, spent / requests * 1e6
                print(f"round {number + 1} {door:4}: {rate:8.0f} req/s, {cost:6.0f} µs CPU/request")
    per = {door: spent / requests * 1e6 for door, (requests, spent) in totals.items()}
    ratio = per["kms"] / per["rest"]
    print(f"service CPU per request: REST {per['rest']:.0f} µs, KMS {per['kms']:.0f} µs, KMS/REST {ratio:.2f}")


if __name__ == "__main__":
    main()
