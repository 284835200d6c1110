"""AWS KMS through boto3: a local KMS-API emulator (moto's server) by default, real AWS when asked.

The emulator runs as a subprocess on 127.0.0.1 with a free port and dummy credentials, so the
bench never reaches the network unless ``--aws-region`` or ``--aws-profile`` is given. The same
config, with an access key pair and a CA bundle, points boto3 at keymanager's own KMS door
(``bench.kmsdoor``, target ``km-kms-api``).
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib.metadata import version
from typing import Any

import httpx

from bench.service import free_port

EMULATOR_NAME = "AWS KMS API (local emulator)"
DOOR_NAME = "keymanager's AWS KMS API"
DUMMY_PAIR = ("testing", "testing")
EMULATOR_REGION = "us-east-1"


@dataclass(frozen=True)
class AwsConfig:
    """Where boto3 sends KMS calls (picklable, for load processes)."""

    endpoint_url: str | None
    region: str
    profile: str | None = None
    key_id: str = ""
    pid: int | None = None
    credentials: tuple[str, str] | None = None
    """An access key pair (keymanager's KMS door); None: the emulator's dummy pair, or the profile's."""
    ca: str | None = None
    """The CA bundle boto3 verifies ``endpoint_url`` with (as ``AWS_CA_BUNDLE`` would give it)."""

    @property
    def emulated(self) -> bool:
        """True for the local emulator, False for real AWS KMS and keymanager's KMS door."""
        return self.endpoint_url is not None and self.credentials is None

    @property
    def label(self) -> str:
        """How every output names this KMS."""
        if self.credentials is not None:
            return f"{DOOR_NAME}, boto3 {version('boto3')}"
        if self.emulated:
            return f"{EMULATOR_NAME}, moto {version('moto')}"
        return f"AWS KMS {self.region}"

    def client(self) -> Any:
        """A new boto3 KMS client of its own session (boto3 sessions are not shared across threads)."""
        import boto3
        from botocore.config import Config

        config = Config(retries={"max_attempts": 1, "mode": "standard"}, max_pool_connections=4)
        if self.endpoint_url is not None:
            pair = self.credentials or DUMMY_PAIR
            session = boto3.session.Session(
                region_name=self.region, aws_access_key_id=pair[0], aws_secret_access_key=pair[1]
            )
            return session.client("kms", endpoint_url=self.endpoint_url, config=config, verify=self.ca)
        session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
        return session.client("kms", config=config)


@contextmanager
def emulator() -> Iterator[AwsConfig]:
    """Run moto's server on a free local port for the block; a config without a key yet."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_emulator(url, process)
        yield AwsConfig(endpoint_url=url, region=EMULATOR_REGION, pid=process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_emulator(url: str, process: subprocess.Popen[bytes]) -> None:
    """Wait until the emulator answers HTTP (30 s at most)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the KMS emulator exited with {process.returncode}")
        try:
            httpx.get(f"{url}/moto-api/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the KMS emulator did not start in 30 s")


def real_aws(region: str | None, profile: str | None) -> AwsConfig:
    """A config for real AWS KMS (credentials from the profile or the usual boto3 chain)."""
    import boto3

    session = boto3.session.Session(profile_name=profile, region_name=region)
    if session.region_name is None:
        raise RuntimeError("--aws-profile without a region: give --aws-region")
    if session.get_credentials() is None:
        raise RuntimeError("no AWS credentials found for the given profile/region")
    return AwsConfig(endpoint_url=None, region=session.region_name, profile=profile)


def with_key(config: AwsConfig, key_id: str | None) -> tuple[AwsConfig, bool]:
    """The config with a symmetric key: ``key_id`` when given, else a new one (True: created here)."""
    if key_id:
        return replace(config, key_id=key_id), False
    created = config.client().create_key(Description="keymanager bench (safe to delete)", KeySpec="SYMMETRIC_DEFAULT")
    return replace(config, key_id=created["KeyMetadata"]["KeyId"]), True


def key_arn(config: AwsConfig) -> str:
    """The ARN of ``config``'s key, as the KMS names it (``DescribeKey``)."""
    client = config.client()
    try:
        return str(client.describe_key(KeyId=config.key_id)["KeyMetadata"]["Arn"])
    finally:
        client.close()


def network_round_trip_ms(config: AwsConfig, tries: int = 5) -> float | None:
    """The median TCP connect time to real AWS KMS's regional endpoint, ms; None for a local endpoint."""
    if config.endpoint_url is not None:
        return None
    host = f"kms.{config.region}.amazonaws.com"
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        with socket.create_connection((host, 443), timeout=10):
            times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def retire_key(config: AwsConfig) -> None:
    """Schedule deletion (7 days, the minimum) of a key the bench created in real AWS KMS."""
    if not config.emulated:
        config.client().schedule_key_deletion(KeyId=config.key_id, PendingWindowInDays=7)
